// Data roots against real folders, files and symlinks in a temporary folder.
#include "daemon/data_roots.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "daemon/controller/job_admission.h"
#include "tests/daemon/temp_dir.h"

namespace tessera::daemon {
namespace {

namespace fs = std::filesystem;

void Touch(const fs::path& path) {
  fs::create_directories(path.parent_path());
  std::ofstream(path) << "x";
}

// A lab: a shared read-only archive, a folder per user, a secret outside.
class DataRootsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    Touch(Path("shared/scans/a.png"));
    Touch(Path("users/alice/in/b.png"));
    Touch(Path("users/bob/in/c.png"));
    fs::create_directories(Path("users/bob/out"));
    Touch(Path("etc/join-token"));
    fs::create_symlink(Path("etc"), Path("users/alice/escape"));
    fs::create_symlink(Path("users/bob/in"), Path("users/alice/bobs"));
    fs::create_symlink(Path("users/alice/in"), Path("users/alice/mine"));
  }
  std::string Path(const std::string& rel) const { return dir_.File(rel); }
  DataRoots Roots() const {
    return DataRoots({{Path("shared"), false}, {Path("users/{user}"), true}});
  }

  testing::TempDir dir_;
};

// How a job uses a path: an input it reads (which must exist), or an output
// it writes (which need not exist yet).
struct Use {
  DataAccess access;
  bool must_exist;
};
constexpr Use kInput{DataAccess::kRead, true}, kOutput{DataAccess::kWrite, false};

struct Row {
  const char* name;
  const char* path;  // relative to the temp folder, or absolute when starting with '/'
  DataUser who;
  Use use;
  bool allowed;
};

TEST_F(DataRootsTest, EachPathAgainstTheRoots) {
  const DataUser alice{"alice", false}, bob{"bob", false}, admin{"root-admin", true};
  const Row rows[] = {
      {"own_input", "users/alice/in", alice, kInput, true},
      {"own_output_not_yet_made", "users/alice/out/run-1", alice, kOutput, true},
      {"shared_read", "shared/scans", alice, kInput, true},
      {"shared_is_read_only", "shared/out", alice, kOutput, false},
      {"another_users_input", "users/bob/in", alice, kInput, false},
      {"output_into_another_users_root", "users/bob/out", alice, kOutput, false},
      {"secret_outside", "etc/join-token", alice, kInput, false},
      {"symlink_escape", "users/alice/escape/join-token", alice, kInput, false},
      {"symlink_into_another_root", "users/alice/bobs/c.png", alice, kInput, false},
      {"symlink_within_own_root", "users/alice/mine/b.png", alice, kInput, true},
      {"output_below_escaping_link", "users/alice/escape/new", alice, kOutput, false},
      {"dot_dot", "users/alice/../bob/in", alice, kInput, false},
      {"missing_input", "users/alice/nothing", alice, kInput, false},
      {"prefix_is_not_a_root", "users/alicex", alice, kOutput, false},
      {"bob_own", "users/bob/in/c.png", bob, kInput, true},
      {"admin_any_users_root", "users/bob/in", admin, kInput, true},
      {"admin_writes_any_users_root", "users/alice/out", admin, kOutput, true},
      {"admin_not_outside_roots", "etc/join-token", admin, kInput, false},
      {"admin_symlink_escape", "users/alice/escape/join-token", admin, kInput, false},
  };
  const DataRoots roots = Roots();
  for (const Row& row : rows) {
    auto got = roots.Check(Path(row.path), row.who, row.use.access, row.use.must_exist, "dataset");
    EXPECT_EQ(got.ok(), row.allowed) << row.name << ": " << got.status().ToString();
    if (!got.ok()) {
      EXPECT_EQ(got.status().code(), StatusCode::kInvalidArgument) << row.name;
      EXPECT_EQ(got.status().field(), "dataset") << row.name;
      EXPECT_EQ(got.status().message().find("/etc"), std::string::npos)
          << row.name << ": the message must not say where a link points";
    }
  }
}

TEST_F(DataRootsTest, WithoutRootsOnlyAdminsNamePaths) {
  const DataRoots none;
  EXPECT_FALSE(none.configured());
  auto admin = none.Check("/anywhere/at/all", {"admin", true}, DataAccess::kWrite, false, "output");
  ASSERT_TRUE(admin.ok());
  EXPECT_EQ(*admin, "/anywhere/at/all");
  auto user =
      none.Check(Path("users/alice/in"), {"alice", false}, DataAccess::kRead, true, "dataset");
  EXPECT_EQ(user.status().field(), "dataset");
  EXPECT_NE(user.status().message().find("no data roots"), std::string::npos);
}

TEST_F(DataRootsTest, UserNamesThatAreNotPathComponentsMatchNoUserRoot) {
  const DataRoots roots = Roots();
  for (const char* name : {"", ".", ".."}) {
    EXPECT_FALSE(roots.Check(Path("users"), {name, false}, DataAccess::kRead, true, "dataset").ok())
        << "\"" << name << "\"";
  }
}

TEST(DataRootValidationTest, RootsAreAbsoluteWithWholeUserComponents) {
  struct Case {
    const char* path;
    bool ok;
  } cases[] = {
      {"/srv/archive", true},     {"/srv/{user}", true},
      {"/srv/{user}/data", true}, {"srv/archive", false},
      {"/srv/../etc", false},     {"/srv/x{user}", false},
      {"/srv/{user}x", false},    {"/srv/{user}/{user}", false},
      {"/srv/{group}", false},    {"", false},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(ValidateDataRoot({c.path, true}, "data_roots[0]").ok(), c.ok) << c.path;
  }
}

// The admission a submission passes: entrypoint policy for users, data roots
// for everyone.
TEST_F(DataRootsTest, AdmissionNamesTheField) {
  JobAdmission admission(Roots(), {{"cmd:train", {{"WANDB_*"}, {}, true}}});
  const api::Principal alice{"alice", api::Role::kUser}, admin{"boss", api::Role::kAdmin};
  auto spec = [&](const std::string& dataset, const std::string& output) {
    api::JobSpec s;
    s.name = "j";
    s.kind = api::JobKind::kInfer;
    s.entrypoint = "cmd:train";
    s.dataset = dataset;
    s.output = output;
    s.global_batch = 1;
    return s;
  };
  struct Case {
    const char* name;
    api::Principal who;
    api::JobSpec spec;
    const char* field;  // nullptr: admitted
  } cases[] = {
      {"own_data", alice, spec(Path("users/alice/in"), Path("users/alice/out")), nullptr},
      {"secret_dataset", alice, spec(Path("etc/join-token"), Path("users/alice/out")), "dataset"},
      {"others_output", alice, spec(Path("users/alice/in"), Path("users/bob/out")), "output"},
      {"admin_others_output", admin, spec(Path("users/alice/in"), Path("users/bob/out")), nullptr},
  };
  for (const Case& c : cases) {
    Status st = admission.Check(c.who, c.spec);
    if (c.field == nullptr) {
      EXPECT_TRUE(st.ok()) << c.name << ": " << st.ToString();
    } else {
      EXPECT_EQ(st.field(), c.field) << c.name << ": " << st.ToString();
    }
  }
  api::JobSpec with_env = spec(Path("users/alice/in"), Path("users/alice/out"));
  with_env.env = {{"WANDB_MODE", "offline"}};
  EXPECT_TRUE(admission.Check(alice, with_env).ok());
  with_env.env = {{"OTHER", "1"}};
  EXPECT_EQ(admission.Check(alice, with_env).field(), "env.OTHER");
  EXPECT_TRUE(admission.Check(admin, with_env).ok()) << "admins are not bound by env_allow";
  with_env.entrypoint = "cmd:unlisted";
  with_env.env = {};
  with_env.args = {"x"};
  EXPECT_EQ(admission.Check(alice, with_env).field(), "args[0]")
      << "an entrypoint without a policy takes no args from users";
}

// A user's infer job may read the checkpoints their own train job saved
// (<checkpoint_root>/job-N) without a data root over the checkpoint root; no
// one else's (admins: anyone's), and a link in a job's folder that points out
// of it grants nothing.
TEST_F(DataRootsTest, AdmissionReadsTheCheckpointsOfTheUsersOwnJobs) {
  Touch(Path("ckpt/job-7/step-3/layers-0-6.bin"));
  Touch(Path("ckpt/job-8/step-5/layers-0-6.bin"));
  Touch(Path("ckpt/job-9/step-1/layers-0-6.bin"));  // a folder no job owns
  Touch(Path("ckpt/jobs-7/step-3/layers-0-6.bin"));
  fs::create_symlink(Path("users/bob/in"), Path("ckpt/job-7/bobs"));
  JobAdmission admission(Roots(), {}, Path("ckpt"));
  const JobAdmission::JobOwnerFn owner_of = [](api::JobId id) -> Result<std::string> {
    if (id == 7) return std::string("alice");
    if (id == 8) return std::string("bob");
    return NotFound("no job " + std::to_string(id));
  };
  const api::Principal alice{"alice", api::Role::kUser}, admin{"boss", api::Role::kAdmin};
  struct Case {
    const char* name;
    api::Principal who;
    const char* checkpoint;  // relative to the temp folder
    bool owners_known;       // owner_of given
    bool admitted;
  } cases[] = {
      {"own_jobs_folder", alice, "ckpt/job-7", true, true},
      {"own_jobs_step", alice, "ckpt/job-7/step-3", true, true},
      {"dotdot_into_own", alice, "ckpt/job-8/../job-7", true, true},
      {"another_users_job", alice, "ckpt/job-8", true, false},
      {"admin_any_job", admin, "ckpt/job-8", true, true},
      {"no_such_job", alice, "ckpt/job-9", true, false},
      {"not_a_job_folder", alice, "ckpt/jobs-7", true, false},
      {"the_root_itself", alice, "ckpt", true, false},
      {"link_out_of_own_job", alice, "ckpt/job-7/bobs", true, false},
      {"owners_unknown", alice, "ckpt/job-7", false, false},
      {"missing_step", alice, "ckpt/job-7/step-4", true, false},
      {"data_root_as_before", alice, "users/alice/in", true, true},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    api::JobSpec s;
    s.name = "colorize";
    s.kind = api::JobKind::kInfer;
    s.entrypoint = "builtin:colorize-unet";
    s.dataset = Path("users/alice/in");
    s.output = Path("users/alice/out");
    s.checkpoint = Path(c.checkpoint);
    s.global_batch = 1;
    const Status st = admission.Check(c.who, s, c.owners_known ? owner_of : nullptr);
    if (c.admitted) {
      EXPECT_TRUE(st.ok()) << st.ToString();
    } else {
      EXPECT_EQ(st.field(), "checkpoint") << st.ToString();
    }
  }
}

// A list file's first kListItemsChecked items are checked at submission;
// the rest only when the listing reads them (a big list is admitted at once).
TEST_F(DataRootsTest, AdmissionChecksTheHeadOfAListFile) {
  JobAdmission admission(Roots(), {});
  const api::Principal alice{"alice", api::Role::kUser};
  const int64_t head = JobAdmission::kListItemsChecked;
  struct Case {
    const char* name;
    int64_t good_lines;  // "in/b.png" lines before one outside alice's roots
    bool admitted;
  } cases[] = {
      {"bad_first_line", 0, false},
      {"bad_last_checked_line", head - 1, false},
      {"bad_line_past_the_head", head, true},
  };
  for (const Case& c : cases) {
    const std::string list = Path(std::string("users/alice/") + c.name + ".txt");
    {
      std::ofstream out(list);
      for (int64_t i = 0; i < c.good_lines; ++i) out << "in/b.png\n";
      out << Path("users/bob/in/c.png") << "\n";
    }
    api::JobSpec spec;
    spec.name = "j";
    spec.kind = api::JobKind::kInfer;
    spec.entrypoint = "builtin:colorize-unet";
    spec.dataset = list;
    spec.output = Path("users/alice/out");
    spec.global_batch = 1;
    Status st = admission.Check(alice, spec);
    if (c.admitted) {
      EXPECT_TRUE(st.ok()) << c.name << ": " << st.ToString();
    } else {
      EXPECT_EQ(st.field(), "dataset") << c.name << ": " << st.ToString();
      EXPECT_NE(st.message().find("line " + std::to_string(c.good_lines + 1) + " of"),
                std::string::npos)
          << c.name << ": " << st.message();
    }
  }
}

}  // namespace
}  // namespace tessera::daemon
