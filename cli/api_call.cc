#include "cli/api_call.h"

#include "api/http_client.h"
#include "api/http_status.h"
#include "api/server_url.h"
#include "api/url.h"

namespace tessera::cli {

using api::Json;

void AppendQuery(std::string& target, std::string_view name, std::string_view value) {
  target += target.find('?') == std::string::npos ? "?" : "&";
  target += name;
  target += "=" + api::PercentEncode(value);
}

void PrintError(std::ostream& err, const Status& st) {
  err << "error: ";
  if (!st.field().empty()) err << st.field() << ": ";
  err << st.message() << "\n";
}

int CallApi(CliContext& ctx, const std::string& method, const std::string& target,
            const std::string& body, Json* result) {
  Result<ClientConfig> config = ResolveClientConfig(ctx.flags, ctx.env);
  if (!config.ok()) {
    PrintError(ctx.err, config.status());
    return kExitUsage;
  }
  Result<api::ServerUrl> addr = api::ParseServerUrl(config->server, "server");
  if (!addr.ok()) {
    PrintError(ctx.err, addr.status());
    return kExitUsage;
  }
  api::HttpClient client(*addr, config->timeout,
                         api::TlsClientOptions{config->ca_file, config->ca_sha256});
  if (!config->token.empty()) client.SetBearerToken(config->token);
  Result<api::HttpResponse> res = client.Request(method, target, body);
  if (!res.ok()) {
    ctx.err << "error: cannot reach tesserad at " << config->server << ": "
            << res.status().message() << "\n";
    return kExitUnreachable;
  }
  if (res->status >= 400) {
    PrintError(ctx.err, api::StatusFromErrorBody(res->status, res->body));
    return kExitApiError;
  }
  *result = nullptr;
  if (!res->body.empty()) {
    *result = Json::parse(res->body, nullptr, /*allow_exceptions=*/false);
    if (result->is_discarded()) {
      ctx.err << "error: the server answered with invalid JSON\n";
      return kExitApiError;
    }
  }
  return kExitOk;
}

}  // namespace tessera::cli
