// The id card an agent hands out so others can invite it:
//   shoal-id:v1:<cluster>:<org>:<base64url public key>:<endpoint>
#pragma once

#include <string>
#include <string_view>

#include "common/status.h"
#include "crypto/identity.h"

namespace shoal::crypto {

struct IdCard {
  std::string cluster;
  std::string org;
  PublicKey public_key{};
  std::string endpoint;  // e.g. tcp://127.0.0.1:7400

  std::string to_string() const;
  friend bool operator==(const IdCard&, const IdCard&) = default;
};

// Errors name the part of the card that is wrong.
Result<IdCard> parse_id_card(std::string_view text);

// The rules a card's words follow wherever they arrive (a card, a token's
// issuer, a signed HELLO): cluster and org are names (common/text.h), the
// endpoint is tcp://HOST:PORT in printable ASCII. `what` prefixes errors.
Status validate_card_fields(std::string_view cluster, std::string_view org,
                            std::string_view endpoint, std::string_view what);

// tcp://HOST:PORT in printable ASCII (at most 255 bytes), port 1-65535: an
// agent's listen address and every endpoint a peer announces.
Status validate_endpoint(std::string_view endpoint, std::string_view field);

}  // namespace shoal::crypto
