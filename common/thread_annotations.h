// Thread-safety annotations: lock rules the compiler checks.
//
// Clang's -Wthread-safety analysis reads these attributes and reports, at
// compile time, a member read or written without the mutex that guards it,
// a function called without a lock it requires, or a lock taken twice.
// Other compilers see empty macros (the code is the same, unchecked).
// common/mutex.h has the annotated Mutex and MutexLock that the analysis
// understands; the CMake option TESSERA_THREAD_SAFETY turns the warning on
// (as an error) for project targets.
//
//   class Queue {
//    public:
//     void Push(int v) EXCLUDES(mu_);
//    private:
//     void TrimLocked() REQUIRES(mu_);
//     Mutex mu_;
//     std::deque<int> items_ GUARDED_BY(mu_);
//   };
//
// Every macro is defined only if it is not defined yet, so a third-party
// header that defines the same names (Abseil's, LLVM's) does not clash.
// Thread safety: compile-time declarations only.
#ifndef TESSERA_COMMON_THREAD_ANNOTATIONS_H_
#define TESSERA_COMMON_THREAD_ANNOTATIONS_H_

#if defined(__clang__)
#define TESSERA_THREAD_ANNOTATION_(x) __attribute__((x))
#else
#define TESSERA_THREAD_ANNOTATION_(x)
#endif

// A class whose instances are locks (a mutex); `name` appears in warnings.
#ifndef CAPABILITY
#define CAPABILITY(name) TESSERA_THREAD_ANNOTATION_(capability(name))
#endif

// An RAII class that holds a capability for its lifetime (MutexLock).
#ifndef SCOPED_CAPABILITY
#define SCOPED_CAPABILITY TESSERA_THREAD_ANNOTATION_(scoped_lockable)
#endif

// A data member read and written only with the capability `x` held.
#ifndef GUARDED_BY
#define GUARDED_BY(x) TESSERA_THREAD_ANNOTATION_(guarded_by(x))
#endif

// A pointer member whose pointee is read and written only with `x` held.
#ifndef PT_GUARDED_BY
#define PT_GUARDED_BY(x) TESSERA_THREAD_ANNOTATION_(pt_guarded_by(x))
#endif

// The caller must hold the capabilities (exclusively) when calling.
#ifndef REQUIRES
#define REQUIRES(...) TESSERA_THREAD_ANNOTATION_(requires_capability(__VA_ARGS__))
#endif

// The caller must not hold the capabilities (the function takes them).
#ifndef EXCLUDES
#define EXCLUDES(...) TESSERA_THREAD_ANNOTATION_(locks_excluded(__VA_ARGS__))
#endif

// The function acquires the capabilities (this object's, without arguments)
// and returns holding them.
#ifndef ACQUIRE
#define ACQUIRE(...) TESSERA_THREAD_ANNOTATION_(acquire_capability(__VA_ARGS__))
#endif

// The function releases capabilities the caller held.
#ifndef RELEASE
#define RELEASE(...) TESSERA_THREAD_ANNOTATION_(release_capability(__VA_ARGS__))
#endif

// The function tries to acquire; its first argument is the return value
// that means success (TRY_ACQUIRE(true)).
#ifndef TRY_ACQUIRE
#define TRY_ACQUIRE(...) TESSERA_THREAD_ANNOTATION_(try_acquire_capability(__VA_ARGS__))
#endif

// The function returns a reference to the capability `x` (an accessor).
#ifndef RETURN_CAPABILITY
#define RETURN_CAPABILITY(x) TESSERA_THREAD_ANNOTATION_(lock_returned(x))
#endif

// The function checks (or promises) that the caller holds the capability;
// after the call the analysis assumes it is held.
#ifndef ASSERT_CAPABILITY
#define ASSERT_CAPABILITY(x) TESSERA_THREAD_ANNOTATION_(assert_capability(x))
#endif

// Turns the analysis off for one function: for code whose locking it cannot
// follow. Say why beside every use.
#ifndef NO_THREAD_SAFETY_ANALYSIS
#define NO_THREAD_SAFETY_ANALYSIS TESSERA_THREAD_ANNOTATION_(no_thread_safety_analysis)
#endif

#endif  // TESSERA_COMMON_THREAD_ANNOTATIONS_H_
