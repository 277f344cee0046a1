#include "agent/advertised_address.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <memory>

namespace tessera::agent {

Result<std::string> LocalAddressTowards(const api::ServerUrl& controller) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* found = nullptr;
  const std::string port = std::to_string(controller.port);
  if (int rc = ::getaddrinfo(controller.host.c_str(), port.c_str(), &hints, &found); rc != 0) {
    return Unavailable("cannot resolve the controller's host '" + controller.host +
                       "': " + ::gai_strerror(rc));
  }
  std::unique_ptr<addrinfo, decltype(&::freeaddrinfo)> list(found, &::freeaddrinfo);
  std::string last_error = "no address";
  for (addrinfo* a = found; a != nullptr; a = a->ai_next) {
    int fd = ::socket(a->ai_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0) continue;
    sockaddr_storage local{};
    socklen_t len = sizeof local;
    const bool ok = ::connect(fd, a->ai_addr, a->ai_addrlen) == 0 &&
                    ::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &len) == 0;
    if (!ok) last_error = std::strerror(errno);
    ::close(fd);
    if (!ok) continue;
    char text[INET6_ADDRSTRLEN] = {};
    const void* raw =
        local.ss_family == AF_INET
            ? static_cast<const void*>(&reinterpret_cast<sockaddr_in*>(&local)->sin_addr)
            : static_cast<const void*>(&reinterpret_cast<sockaddr_in6*>(&local)->sin6_addr);
    if (::inet_ntop(local.ss_family, raw, text, sizeof text) != nullptr) return std::string(text);
  }
  return Unavailable("no route to the controller's host '" + controller.host + "': " + last_error);
}

Result<std::string> AdvertisedAddress(const std::string& configured,
                                      const api::ServerUrl& controller) {
  std::string address = configured;
  if (address.empty()) {
    TESSERA_ASSIGN_OR_RETURN(address, LocalAddressTowards(controller));
  }
  if (api::IsLoopbackHost(address) && !api::IsLoopbackHost(controller.host)) {
    return InvalidArgument("is " + address + ", a loopback address, but the controller (" +
                               controller.host +
                               ") is on another host: its other nodes could not reach this "
                               "node's ranks; give an address they can reach, or leave it unset",
                           "address");
  }
  return address;
}

}  // namespace tessera::agent
