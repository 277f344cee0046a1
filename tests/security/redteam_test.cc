// Red-team suite: a real tesserad and tessera-agent on loopback, attacked as
// a user with a plain token (or a stray client on the network) would. Each
// attack is one row of the table below and must be refused (a 4xx whose
// error.field names what was refused) or have no effect; the positive
// controls ("*_allowed") show the refusals are not blanket ones.
//
// The lab (made once for the suite):
//   data/shared              a read-only data root
//   data/users/{user}        each user's read/write root (alice's and bob's)
//   controller/join-token    a secret outside every root
//   cmd:probe                a registered script; users may set PROBE_* and
//                            pass --mode=*; cmd:open lets them set any env key
//   run_as: alice -> nobody  when the test runs as root
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <pwd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <functional>
#include <sstream>
#include <thread>

#include "daemon/auth/lease_tokens.h"
#include "tests/integration/harness.h"

namespace tessera::testing {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

const char* kInventory = R"yaml(devices:
  - {name: "cpu-a (emulated)", memory: 8GiB, relative_speed: 0.25}
  - {name: "cpu-b (emulated)", memory: 8GiB, relative_speed: 0.25}
)yaml";

// The probe worker: says who it runs as, then waits (an infer job's ranks
// must stay up while the lease rows run).
const char* kProbeScript = R"sh(#!/bin/sh
echo "probe uid=$(id -u) gid=$(id -g) home=$HOME mode=$1 x=$PROBE_X"
if [ "$1" = "--mode=wait" ]; then sleep 120; fi
exit 0
)sh";

// What an attack got back.
struct Outcome {
  int status = 0;       // HTTP status (0: none)
  std::string field;    // error.field of a JSON error body
  std::string body;     // the whole body
  std::string problem;  // set when the attack could not even be tried
};

Outcome FromResponse(const Result<api::HttpResponse>& r) {
  Outcome o;
  if (!r.ok()) {
    o.problem = r.status().ToString();
    return o;
  }
  o.status = r->status;
  o.body = r->body;
  api::Json j = api::Json::parse(r->body, nullptr, false);
  if (j.is_object() && j.contains("error") && j["error"].is_object()) {
    o.field = j["error"].value("field", "");
  }
  return o;
}

// A raw TCP connection to tesserad, for what HttpClient will not send.
class RawConnection {
 public:
  RawConnection(const std::string& host, uint16_t port) {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    ::inet_pton(AF_INET, host.c_str(), &a.sin_addr);
    if (::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
      ::close(fd_);
      fd_ = -1;
    }
    timeval tv{30, 0};
    if (fd_ >= 0) ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  }
  ~RawConnection() {
    if (fd_ >= 0) ::close(fd_);
  }
  bool ok() const { return fd_ >= 0; }
  bool Send(const std::string& bytes) {
    return ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL) ==
           static_cast<ssize_t>(bytes.size());
  }
  // Everything until the peer closes (or 30 s of silence).
  std::string ReadAll() {
    std::string out;
    char buf[4096];
    while (true) {
      ssize_t n = ::recv(fd_, buf, sizeof(buf), 0);
      if (n <= 0) break;
      out.append(buf, static_cast<size_t>(n));
    }
    return out;
  }
  // True once the peer has closed (recv returns 0 or a reset) without
  // waiting past `wait`.
  bool ClosedByPeer(std::chrono::milliseconds wait) {
    timeval tv{static_cast<time_t>(wait.count() / 1000),
               static_cast<suseconds_t>((wait.count() % 1000) * 1000)};
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    char buf[512];
    while (true) {
      ssize_t n = ::recv(fd_, buf, sizeof(buf), 0);
      if (n == 0) return true;
      if (n < 0) return errno != EAGAIN && errno != EWOULDBLOCK;
    }
  }

 private:
  int fd_ = -1;
};

int StatusOfRawAnswer(const std::string& answer) {
  // "HTTP/1.1 413 Payload Too Large\r\n..."
  if (!answer.starts_with("HTTP/1.1 ")) return 0;
  return std::atoi(answer.substr(9, 3).c_str());
}

std::string JobPath(api::JobId id) { return "/api/v1/jobs/" + std::to_string(id); }

// The suite's one cluster and its users.
class Lab {
 public:
  Lab() {
    ::setenv("TESSERA_TEST_NO_NETNS", "1", 1);  // raw sockets speak to 127.0.0.1
    cluster_ = std::make_unique<Cluster>("redteam");
    const fs::path d = cluster_->dir();
    for (const char* folder : {"data/shared/scans", "data/users/alice/in", "data/users/alice/out",
                               "data/users/bob/in", "data/users/bob/out", "model"}) {
      fs::create_directories(d / folder);
    }
    for (int i = 0; i < 4; ++i) {
      std::ofstream(d / "data/users/alice/in" / ("scan-" + std::to_string(i) + ".png")) << "x";
    }
    std::ofstream(d / "data/users/bob/in/private.png") << "bob's";
    // A link inside alice's root to the controller's state folder.
    fs::create_symlink(d / "controller", d / "data/users/alice/escape");
    probe_ = d / "probe.sh";
    std::ofstream(probe_) << kProbeScript;
    fs::permissions(probe_, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                                fs::perms::others_read | fs::perms::others_exec);

    std::string config = "data_roots:\n  - {path: \"" + (d / "data/shared").string() +
                         "\", access: read}\n  - {path: \"" + (d / "data/users").string() +
                         "/{user}\", access: write}\n"
                         "entrypoints:\n"
                         "  \"cmd:probe\": {env_allow: [\"PROBE_*\"], args_allow: [\"--mode=*\"]}\n"
                         "  \"cmd:open\": {env_allow: [\"*\"], free_args: true}\n"
                         "idle_timeout_ms: 10000\n"
                         "body_limit_bytes: 65536\n"
                         // Plain HTTP, so raw connections can send what HttpClient will
                         // not (the TLS edge has its own rows: node_tls_test.cc).
                         "tls: off\n"
                         "allow_insecure_http: true\n";
    struct passwd* nobody = ::getpwnam("nobody");
    if (::geteuid() == 0 && nobody != nullptr) {
      run_as_uid_ = static_cast<int>(nobody->pw_uid);
      config += "run_as: {alice: nobody}\n";
    }
    cluster_->StartController(config);
    cluster_->StartAgent("boxa", kInventory);
    if (!WaitFor([&] { return cluster_->HealthyNodes() == 1; }, 30s)) {
      throw std::runtime_error("agent did not join:\n" + cluster_->controller()->Log());
    }
    for (const char* name : {"cmd:probe", "cmd:open"}) {
      int status = 0;
      cluster_->PostJson("/api/v1/entrypoints",
                         {{"name", name}, {"command", probe_.string()}, {"description", "probe"}},
                         &status);
      if (status < 200 || status > 204) throw std::runtime_error("entrypoint not allowed");
    }
    alice_ = MakeToken("alice");
    bob_ = MakeToken("bob");
  }

  Cluster& cluster() { return *cluster_; }
  const fs::path& dir() const { return cluster_->dir(); }
  fs::path Data(const std::string& rel) const { return dir() / "data" / rel; }
  const std::string& alice() const { return alice_; }
  const std::string& bob() const { return bob_; }
  int run_as_uid() const { return run_as_uid_; }

  Outcome Call(const std::string& token, const std::string& method, const std::string& target,
               const api::Json& body = nullptr) {
    auto client = cluster_->Client(token);
    return FromResponse(client->Request(method, target, body.is_null() ? "" : body.dump()));
  }
  Outcome Submit(const std::string& token, const api::Json& spec) {
    return Call(token, "POST", "/api/v1/jobs", spec);
  }
  // A lease call for alice's infer job (rank `rank` of `attempt`, up to `max_chunks`),
  // sent with `token`.
  Outcome RequestLease(const std::string& token, int attempt, int rank, int max_chunks) {
    return Call(token, "POST", JobPath(AliceInferJob()) + "/leases",
                {{"attempt", attempt}, {"rank", rank}, {"max_chunks", max_chunks}});
  }

  // Alice's running infer job (cmd:probe ranks waiting), made on first use.
  api::JobId AliceInferJob() {
    if (infer_job_ == 0) {
      Outcome o = Submit(alice_, InferSpec("leased", Data("users/alice/in")));
      api::Json j = api::Json::parse(o.body, nullptr, false);
      if (o.status != 201) throw std::runtime_error("infer job refused: " + o.body);
      infer_job_ = j.value("id", api::JobId{0});
      if (!WaitFor([&] { return cluster_->JobState(infer_job_) == "running"; }, 60s)) {
        throw std::runtime_error("infer job did not run: " + cluster_->JobState(infer_job_) + "\n" +
                                 cluster_->controller()->Log());
      }
    }
    return infer_job_;
  }

  api::Json InferSpec(const std::string& name, const fs::path& dataset) {
    return {{"name", name},
            {"kind", "infer"},
            {"entrypoint", "cmd:probe"},
            {"dataset", dataset.string()},
            {"output", Data("users/alice/out").string()},
            {"args", {"--mode=wait"}},
            {"global_batch", 1},
            {"max_devices", 1}};
  }

  // A lease token the controller would give rank `rank` of `attempt` of job `id` (its
  // key is in its state folder).
  std::string LeaseToken(api::JobId id, int64_t attempt, int64_t rank) {
    std::string key;
    std::ifstream(dir() / "controller" / "lease-key") >> key;
    return daemon::LeaseTokens(key).For(id, attempt, rank);
  }

 private:
  std::string MakeToken(const std::string& user) { return cluster_->UserToken(user); }

  std::unique_ptr<Cluster> cluster_;
  fs::path probe_;
  std::string alice_, bob_;
  int run_as_uid_ = -1;
  api::JobId infer_job_ = 0;
};

api::Json ProbeSpec(const std::string& name) {
  return {{"name", name},
          {"entrypoint", "cmd:probe"},
          {"args", {"--mode=once"}},
          {"global_batch", 1},
          {"max_devices", 1}};
}

api::Json BuiltinTrainSpec(const std::string& name) {
  return {
      {"name", name}, {"entrypoint", "builtin:colorize-unet"}, {"global_batch", 4}, {"steps", 1}};
}

// One attack. `expect_status`: the refusal's status (0: any 4xx); -1: the
// attack must succeed (a positive control). `expect_field`: error.field.
// `check`: more assertions on the outcome (no effect, no leak).
struct Attack {
  const char* name;
  std::function<Outcome(Lab&)> run;
  int expect_status;
  const char* expect_field;
  std::function<void(Lab&, const Outcome&)> check = nullptr;
};

api::Json With(api::Json spec, const std::string& key, api::Json value) {
  spec[key] = std::move(value);
  return spec;
}

// The attack of submitting `spec` as alice, or as the admin.
std::function<Outcome(Lab&)> AliceSubmits(api::Json spec) {
  return [spec = std::move(spec)](Lab& l) { return l.Submit(l.alice(), spec); };
}
std::function<Outcome(Lab&)> AdminSubmits(api::Json spec) {
  return [spec = std::move(spec)](Lab& l) { return l.Submit(l.cluster().admin_token(), spec); };
}

const Attack kAttacks[] = {
    // ---- env: the global deny list, which no entrypoint lifts ----
    {"env_ld_preload",
     AliceSubmits(With(BuiltinTrainSpec("x"), "env", {{"LD_PRELOAD", "/home/alice/x.so"}})), 400,
     "env.LD_PRELOAD"},
    {"env_path", AliceSubmits(With(ProbeSpec("x"), "env", {{"PATH", "/home/alice/bin"}})), 400,
     "env.PATH"},
    {"env_pythonpath", AliceSubmits(With(ProbeSpec("x"), "env", {{"PYTHONPATH", "/home/alice"}})),
     400, "env.PYTHONPATH"},
    {"env_bash_env", AliceSubmits(With(ProbeSpec("x"), "env", {{"BASH_ENV", "/home/alice/rc"}})),
     400, "env.BASH_ENV"},
    {"env_ld_preload_where_every_key_is_allowed",
     AliceSubmits(
         With(With(ProbeSpec("x"), "entrypoint", "cmd:open"), "env", {{"LD_PRELOAD", "/x.so"}})),
     400, "env.LD_PRELOAD"},
    {"env_ld_preload_as_admin",
     AdminSubmits(With(ProbeSpec("x"), "env", {{"LD_PRELOAD", "/x.so"}})), 400, "env.LD_PRELOAD"},
    {"env_key_outside_env_allow", AliceSubmits(With(ProbeSpec("x"), "env", {{"OTHER", "1"}})), 400,
     "env.OTHER"},
    // ---- args ----
    {"builtin_test_hook_args",
     [](Lab& l) {
       return l.Submit(l.alice(), With(BuiltinTrainSpec("x"), "args",
                                       {"--dump-params", l.Data("users/bob/out").string()}));
     },
     400, "args[0]"},
    {"builtin_test_hook_args_as_admin",
     AdminSubmits(With(BuiltinTrainSpec("x"), "args", {"--lr", "0.1", "--dump-params=/tmp"})), 400,
     "args[2]"},
    {"cmd_args_outside_args_allow",
     AliceSubmits(With(ProbeSpec("x"), "args", {"--mode=once", "/etc/shadow"})), 400, "args[1]"},
    // ---- data roots ----
    {"dataset_is_a_secret_file",
     [](Lab& l) {
       api::Json spec = l.InferSpec("x", l.dir() / "controller/join-token");
       return l.Submit(l.alice(), spec);
     },
     400, "dataset",
     [](Lab& l, const Outcome& o) {
       const std::string secret = ReadText(l.dir() / "controller/join-token");
       ASSERT_FALSE(secret.empty());
       EXPECT_EQ(o.body.find(secret.substr(0, 12)), std::string::npos) << "the secret leaked";
     }},
    {"dataset_through_a_symlink_out_of_the_root",
     [](Lab& l) {
       return l.Submit(l.alice(), l.InferSpec("x", l.Data("users/alice/escape/join-token")));
     },
     400, "dataset"},
    {"dataset_of_another_user",
     [](Lab& l) { return l.Submit(l.alice(), l.InferSpec("x", l.Data("users/bob/in"))); }, 400,
     "dataset"},
    {"output_into_another_users_root",
     [](Lab& l) {
       api::Json spec = l.InferSpec("x", l.Data("users/alice/in"));
       spec["output"] = l.Data("users/bob/out").string();
       return l.Submit(l.alice(), spec);
     },
     400, "output",
     [](Lab& l, const Outcome&) { EXPECT_TRUE(fs::is_empty(l.Data("users/bob/out"))); }},
    {"output_into_the_shared_read_only_root",
     [](Lab& l) {
       api::Json spec = l.InferSpec("x", l.Data("users/alice/in"));
       spec["output"] = l.Data("shared/out").string();
       return l.Submit(l.alice(), spec);
     },
     400, "output"},
    {"list_file_items_outside_the_roots",
     [](Lab& l) {
       const fs::path list = l.Data("users/alice/list.txt");
       std::ofstream(list) << "in/scan-0.png\n"
                           << (l.dir() / "controller/join-token").string() << "\n";
       return l.Submit(l.alice(), l.InferSpec("x", list));
     },
     400, "dataset",
     [](Lab& l, const Outcome& o) {
       EXPECT_NE(o.body.find("line 2"), std::string::npos) << o.body;
       EXPECT_EQ(o.body.find("join-token"), std::string::npos) << "the list's line was quoted";
     }},
    {"list_file_item_in_another_users_root",
     [](Lab& l) {
       const fs::path list = l.Data("users/alice/list-bob.txt");
       std::ofstream(list) << l.Data("users/bob/in/private.png").string() << "\n";
       return l.Submit(l.alice(), l.InferSpec("x", list));
     },
     400, "dataset"},
    {"own_list_file_allowed",
     [](Lab& l) {
       const fs::path list = l.Data("users/alice/list-own.txt");
       std::ofstream(list) << "in/scan-1.png\n";
       api::Json spec = l.InferSpec("own-list", list);
       spec["args"] = {"--mode=once"};
       return l.Submit(l.alice(), spec);
     },
     -1, ""},
    // ---- other users' jobs ----
    {"read_another_users_job",
     [](Lab& l) { return l.Call(l.bob(), "GET", JobPath(l.AliceInferJob())); }, 403, ""},
    {"read_another_users_logs",
     [](Lab& l) { return l.Call(l.bob(), "GET", JobPath(l.AliceInferJob()) + "/logs?rank=0"); },
     403, ""},
    {"list_another_users_jobs",
     [](Lab& l) { return l.Call(l.bob(), "GET", "/api/v1/jobs?owner=alice"); }, 403, ""},
    {"cancel_another_users_job",
     [](Lab& l) {
       return l.Call(l.bob(), "POST", JobPath(l.AliceInferJob()) + "/cancel", api::Json::object());
     },
     403, "",
     [](Lab& l, const Outcome&) {
       EXPECT_EQ(l.cluster().JobState(l.AliceInferJob()), "running") << "the cancel took effect";
     }},
    // ---- lease tokens ----
    {"lease_with_the_ranks_own_token_allowed",
     [](Lab& l) { return l.RequestLease(l.LeaseToken(l.AliceInferJob(), 1, 0), 1, 0, 0); }, -1, ""},
    {"lease_with_another_ranks_token",
     [](Lab& l) { return l.RequestLease(l.LeaseToken(l.AliceInferJob(), 1, 0), 1, 1, 4); }, 401,
     ""},
    {"lease_with_a_foreign_jobs_token",
     [](Lab& l) { return l.RequestLease(l.LeaseToken(l.AliceInferJob() + 1000, 1, 0), 1, 0, 4); },
     401, ""},
    {"lease_with_a_stale_attempts_token",
     [](Lab& l) {
       // Attempt 1 is the live one: attempt 0's token (as a worker of an
       // earlier attempt would hold) names an attempt that is not running.
       return l.RequestLease(l.LeaseToken(l.AliceInferJob(), 0, 0), 0, 0, 4);
     },
     0, ""},
    {"lease_with_a_user_token", [](Lab& l) { return l.RequestLease(l.alice(), 1, 0, 4); }, 401, ""},
    // ---- on the node: what a permitted job gets ----
    // Its folders are closed to other accounts; with run_as (the test running
    // as root) its worker runs as the mapped account, never as the agent's.
    {"permitted_job_runs_as_its_account_in_closed_folders",
     [](Lab& l) {
       return l.Submit(l.alice(), With(ProbeSpec("probe"), "env", {{"PROBE_X", "seen"}}));
     },
     -1, "",
     [](Lab& l, const Outcome& o) {
       const api::JobId id = api::Json::parse(o.body).value("id", api::JobId{0});
       const fs::path job_dir = l.dir() / "agent-boxa" / "jobs" / std::to_string(id);
       ASSERT_TRUE(WaitFor([&] { return l.cluster().JobState(id) == "succeeded"; }, 60s))
           << l.cluster().JobState(id) << "\n"
           << l.cluster().GetJson(JobPath(id)).dump() << "\n"
           << ReadText(job_dir / "1" / "rank-0" / "worker.log") << "\n"
           << l.cluster().agent("boxa")->Log();
       const std::string log = ReadText(job_dir / "1" / "rank-0" / "worker.log");
       EXPECT_NE(log.find("x=seen"), std::string::npos) << log;
       for (const fs::path& dir : {job_dir, job_dir / "1", job_dir / "1" / "rank-0"}) {
         struct stat st {};
         ASSERT_EQ(::stat(dir.c_str(), &st), 0) << dir;
         EXPECT_EQ(st.st_mode & 07, 0u) << dir << " is open to other accounts";
         EXPECT_EQ(st.st_uid, ::geteuid()) << dir << " belongs to the agent";
         EXPECT_EQ(st.st_mode & 020, 0u) << dir << ": the worker's group may not write";
       }
       if (l.run_as_uid() >= 0) {
         EXPECT_NE(log.find("uid=" + std::to_string(l.run_as_uid()) + " "), std::string::npos)
             << log;
       } else {
         EXPECT_NE(log.find("uid=" + std::to_string(::geteuid()) + " "), std::string::npos) << log;
       }
     }},
    // ---- the HTTP edge ----
    {"oversized_headers",
     [](Lab& l) {
       RawConnection c(l.cluster().controller_host(), l.cluster().port());
       Outcome o;
       if (!c.ok()) return Outcome{0, "", "", "cannot connect"};
       c.Send("GET /api/v1/jobs HTTP/1.1\r\nHost: x\r\nX-Big: " + std::string(64 * 1024, 'a') +
              "\r\n\r\n");
       o.body = c.ReadAll();
       o.status = StatusOfRawAnswer(o.body);
       return o;
     },
     413, ""},
    {"oversized_body",
     [](Lab& l) {
       api::Json spec = ProbeSpec("x");
       spec["name"] = std::string(128 * 1024, 'a');  // over body_limit_bytes (64 KiB)
       return l.Submit(l.alice(), spec);
     },
     413, ""},
    {"slow_loris",
     [](Lab& l) {
       RawConnection c(l.cluster().controller_host(), l.cluster().port());
       if (!c.ok()) return Outcome{0, "", "", "cannot connect"};
       c.Send("GET /api/v1/jobs HTTP/1.1\r\nHost: x\r\n");
       // One header line every 300 ms; the server's deadline is for the
       // whole request (idle_timeout_ms: 10000), not per byte.
       const auto start = std::chrono::steady_clock::now();
       bool closed = false;
       while (!closed && std::chrono::steady_clock::now() - start < 30s) {
         if (!c.Send("X-Slow: 1\r\n")) {
           closed = true;
           break;
         }
         closed = c.ClosedByPeer(300ms);
       }
       Outcome o;
       o.status = closed ? 408 : 0;  // "closed on us", in this table's terms
       // Meanwhile everyone else is served.
       Outcome health = l.Call(l.alice(), "GET", "/api/v1/jobs");
       if (health.status != 200) o.problem = "server stopped answering: " + health.body;
       return o;
     },
     408, ""},
};

// One lab for the whole table (a cluster per row would cost seconds each).
TEST(RedTeamTest, EveryAttackIsRefusedOrHasNoEffect) {
  Lab lab;
  for (const Attack& a : kAttacks) {
    SCOPED_TRACE(a.name);
    Outcome o = a.run(lab);
    if (!o.problem.empty()) {
      ADD_FAILURE() << o.problem;
      continue;
    }
    if (a.expect_status == -1) {
      EXPECT_GE(o.status, 200) << o.body;
      EXPECT_LT(o.status, 300) << o.body;
    } else if (a.expect_status == 0) {
      EXPECT_GE(o.status, 400) << o.body;
      EXPECT_LT(o.status, 500) << o.body;
    } else {
      EXPECT_EQ(o.status, a.expect_status) << o.body;
    }
    if (a.expect_field != nullptr && *a.expect_field != '\0') {
      EXPECT_EQ(o.field, a.expect_field) << o.body;
    }
    if (a.check) a.check(lab, o);
  }
}

}  // namespace
}  // namespace tessera::testing
