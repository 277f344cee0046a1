#include "daemon/controller/job_admission.h"

#include <filesystem>
#include <optional>
#include <string_view>
#include <system_error>

#include "common/quantities.h"
#include "daemon/auth/api_tokens.h"

namespace tessera::daemon {

JobAdmission::JobAdmission(DataRoots roots,
                           std::map<std::string, api::EntrypointPolicy> entrypoints,
                           std::string checkpoint_root)
    : roots_(std::move(roots)),
      entrypoints_(std::move(entrypoints)),
      checkpoint_root_(std::move(checkpoint_root)) {}

bool JobAdmission::InOwnJobsCheckpoints(const api::Principal& who, const std::string& path,
                                        const JobOwnerFn& owner_of) const {
  if (checkpoint_root_.empty() || !owner_of) return false;
  // Resolved (every symlink followed), so a link inside a job's folder that
  // points out of it grants nothing.
  std::error_code ec;
  const std::filesystem::path resolved = std::filesystem::canonical(path, ec);
  if (ec) return false;
  const std::filesystem::path root = std::filesystem::weakly_canonical(checkpoint_root_, ec);
  if (ec) return false;
  const std::filesystem::path rel = resolved.lexically_relative(root);
  if (rel.empty()) return false;
  const std::string folder = rel.begin()->string();  // "job-<id>"
  constexpr std::string_view kPrefix = "job-";
  if (!folder.starts_with(kPrefix)) return false;
  const std::optional<int64_t> id =
      ParseWholeNumber(std::string_view(folder).substr(kPrefix.size()));
  if (!id || *id <= 0) return false;
  Result<std::string> owner = owner_of(*id);
  return owner.ok() && (who.is_admin() || *owner == who.user);
}

api::EntrypointPolicy JobAdmission::PolicyFor(const std::string& entrypoint) const {
  if (auto it = entrypoints_.find(entrypoint); it != entrypoints_.end()) return it->second;
  if (auto it = entrypoints_.find("*"); it != entrypoints_.end()) return it->second;
  return {};
}

Status JobAdmission::Check(const api::Principal& who, const api::JobSpec& spec,
                           const JobOwnerFn& owner_of) const {
  if (!who.is_admin()) {
    TESSERA_RETURN_IF_ERROR(api::CheckEntrypointPolicy(spec, PolicyFor(spec.entrypoint)));
  }
  const DataUser user{who.user, who.is_admin()};
  if (!spec.dataset.empty()) {
    TESSERA_ASSIGN_OR_RETURN(
        std::string dataset,
        roots_.Check(spec.dataset, user, DataAccess::kRead, /*must_exist=*/true, "dataset"));
    // A list file names its items: the first ones are checked now, so a bad
    // one is a 400 rather than a failed job. The listing checks every item
    // before the job starts; checking (and holding) all of them here would
    // make a 10-million-line submission take a minute and hold them all.
    std::error_code ec;
    if (roots_.configured() && spec.kind == api::JobKind::kInfer &&
        std::filesystem::is_regular_file(dataset, ec)) {
      const DataRoots* roots = &roots_;
      InputPathCheck may_read = [roots, user](const std::string& path) -> Status {
        return roots->Check(path, user, DataAccess::kRead, /*must_exist=*/true, "dataset").status();
      };
      TESSERA_RETURN_IF_ERROR(CheckInferInputHead(spec.dataset, may_read, kListItemsChecked));
    }
  }
  if (!spec.checkpoint.empty() && !InOwnJobsCheckpoints(who, spec.checkpoint, owner_of)) {
    TESSERA_RETURN_IF_ERROR(
        roots_.Check(spec.checkpoint, user, DataAccess::kRead, /*must_exist=*/true, "checkpoint")
            .status());
  }
  if (!spec.output.empty()) {
    TESSERA_RETURN_IF_ERROR(
        roots_.Check(spec.output, user, DataAccess::kWrite, /*must_exist=*/false, "output")
            .status());
  }
  return Status::Ok();
}

Result<InputPathCheck> JobAdmission::InputCheckFor(Store* store, const std::string& owner) const {
  DataUser user{owner, false};
  if (roots_.configured()) {  // without roots nothing is checked: skip the lookup
    TESSERA_ASSIGN_OR_RETURN(std::vector<TokenInfo> tokens, store->ListTokens());
    user.admin = auth::HoldsAdminToken(tokens, owner);
  } else {
    user.admin = true;  // jobs naming paths were admitted as an admin's (or before roots)
  }
  const DataRoots* roots = &roots_;
  return InputPathCheck([roots, user](const std::string& path) -> Status {
    return roots->Check(path, user, DataAccess::kRead, /*must_exist=*/true, "dataset").status();
  });
}

}  // namespace tessera::daemon
