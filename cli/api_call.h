// How a command talks to tesserad and prints its answer: CallApi (one REST
// call with the run's server, token and TLS settings), AppendQuery (a query
// parameter, encoded), PrintError (the CLI's one error line), Emit (the API's
// JSON with --json, else a human form) and CallAndEmit (the two together, for
// a command that prints what it is told).
//
// Thread safety: as RunCli (a CliContext belongs to one run).
#ifndef TESSERA_CLI_API_CALL_H_
#define TESSERA_CLI_API_CALL_H_

#include <optional>
#include <ostream>
#include <string>

#include "api/types.h"
#include "cli/cli_app.h"
#include "common/status.h"

namespace tessera::cli {

// Appends `name=value` (the value percent-encoded) to `target`'s query.
void AppendQuery(std::string& target, std::string_view name, std::string_view value);

// "error: <field>: <message>" (no field: "error: <message>") on `err`.
void PrintError(std::ostream& err, const Status& st);

// One API call: resolves the config (ctx.flags, ctx.env), sends, turns the
// answer into JSON. Returns an exit code (kExitOk, kExitUsage for a bad
// config, kExitUnreachable, kExitApiError for an error answer or invalid
// JSON, said on ctx.err); on kExitOk *result holds the JSON body (null when
// the answer had no body). REQUIRES: result != nullptr.
int CallApi(CliContext& ctx, const std::string& method, const std::string& target,
            const std::string& body, api::Json* result);

// `r`'s value; or, when `r` failed (bad flags or arguments), nullopt after
// printing its error and setting ctx.exit_code to kExitUsage.
template <typename T>
std::optional<T> UsageChecked(CliContext& ctx, Result<T> r) {
  if (r.ok()) return *std::move(r);
  PrintError(ctx.err, r.status());
  ctx.exit_code = kExitUsage;
  return std::nullopt;
}

// Prints `result` as JSON (--json) or with `human`.
template <typename Human>
void Emit(CliContext& ctx, const api::Json& result, Human human) {
  if (ctx.json) {
    ctx.out << result.dump(2, ' ', false, api::Json::error_handler_t::replace) << "\n";
  } else {
    human(result);
  }
}

// A command whose answer is its result: CallApi, then, when it succeeded,
// Emit the answer with `human`. Sets ctx.exit_code.
template <typename Human>
void CallAndEmit(CliContext& ctx, const std::string& method, const std::string& target,
                 const std::string& body, Human human) {
  api::Json answer;
  ctx.exit_code = CallApi(ctx, method, target, body, &answer);
  if (ctx.exit_code == kExitOk) Emit(ctx, answer, human);
}

}  // namespace tessera::cli

#endif  // TESSERA_CLI_API_CALL_H_
