// JoinBundle: what a new node needs to join the cluster, in one small text
// file an admin prints (`tessera nodes join-bundle`) and copies to the node:
// the controller's URL, the SHA-256 fingerprint its clients pin (tesserad's
// CA, api/tls_context.h) and the join token that buys the node's own
// credential once (api/node_identity.h).
//
//   # tessera join bundle (secret: it holds the join token)
//   controller = "https://ctl.lab:8443"
//   ca-sha256 = "AB:CD:...:EF"
//   join-token = "tsj_..."
//
// The keys are tessera-agent's option names, so the file also works as the
// agent's --config file (CLI11 reads this TOML subset); `tessera-agent
// --join-bundle FILE` reads it beside another config.
//
// Thread safety: pure functions.
#ifndef TESSERA_API_JOIN_BUNDLE_H_
#define TESSERA_API_JOIN_BUNDLE_H_

#include <string>
#include <string_view>

#include "common/status.h"

namespace tessera::api {

struct JoinBundle {
  std::string controller;  // http(s)://host:port
  std::string ca_sha256;   // "" for a plain-HTTP controller
  std::string join_token;
};

std::string FormatJoinBundle(const JoinBundle& bundle);

// Lines of `key = "value"` (quotes optional), '#' comments and blank lines;
// "controller" and "join-token" are required. kInvalidArgument naming the
// key (or "join_bundle" for a malformed line).
Result<JoinBundle> ParseJoinBundle(std::string_view text);

}  // namespace tessera::api

#endif  // TESSERA_API_JOIN_BUNDLE_H_
