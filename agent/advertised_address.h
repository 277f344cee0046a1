// Advertised address: the address other nodes reach this node's ranks at. It
// becomes MASTER_ADDR when a rank of this node is rank 0, so it must be one the
// other nodes can connect to.
//
// By default it is the local address this host uses to reach the controller
// (the source address the kernel picks for a UDP socket connected to it; no
// packet is sent): on a multi-homed host that is the interface facing the
// cluster. A loopback address is refused when the controller is not on this
// host (the other nodes would connect to themselves).
//
// Thread safety: pure functions (they resolve names and open a socket).
#ifndef TESSERA_AGENT_ADVERTISED_ADDRESS_H_
#define TESSERA_AGENT_ADVERTISED_ADDRESS_H_

#include <string>

#include "api/server_url.h"
#include "common/status.h"

namespace tessera::agent {

// The local address facing `controller`. kUnavailable when its host cannot be
// resolved or no route leads to it.
Result<std::string> LocalAddressTowards(const api::ServerUrl& controller);

// `configured` when set (checked below), else LocalAddressTowards(controller).
// kInvalidArgument naming "address" for a loopback address while the
// controller's host is not loopback.
Result<std::string> AdvertisedAddress(const std::string& configured,
                                      const api::ServerUrl& controller);

}  // namespace tessera::agent

#endif  // TESSERA_AGENT_ADVERTISED_ADDRESS_H_
