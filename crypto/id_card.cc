#include "crypto/id_card.h"

#include <vector>

namespace shoal::crypto {

std::string IdCard::to_string() const {
  return "shoal-id:v1:" + cluster + ":" + org + ":" + key_to_text(public_key) + ":" + endpoint;
}

Result<IdCard> parse_id_card(std::string_view text) {
  // The endpoint itself holds ':' (tcp://host:port), so split the first five only.
  std::vector<std::string_view> parts;
  size_t start = 0;
  while (parts.size() < 5) {
    size_t colon = text.find(':', start);
    if (colon == std::string_view::npos) break;
    parts.push_back(text.substr(start, colon - start));
    start = colon + 1;
  }
  if (parts.size() < 5) {
    return invalid_argument(
        "id card: expected shoal-id:v1:<cluster>:<org>:<public key>:<endpoint>");
  }
  if (parts[0] != "shoal-id") return invalid_argument("id card prefix: expected \"shoal-id\"");
  if (parts[1] != "v1") {
    return invalid_argument("id card version: expected \"v1\", got \"" + std::string(parts[1]) +
                            "\"");
  }
  IdCard card;
  card.cluster = parts[2];
  card.org = parts[3];
  if (card.cluster.empty()) return invalid_argument("id card cluster: expected a name");
  if (card.org.empty()) return invalid_argument("id card org: expected a name");
  SHOAL_ASSIGN_OR_RETURN(card.public_key, key_from_text(parts[4], "id card public key"));
  card.endpoint = text.substr(start);
  if (card.endpoint.rfind("tcp://", 0) != 0 || card.endpoint.size() <= 6) {
    return invalid_argument("id card endpoint: expected tcp://HOST:PORT, got \"" +
                            card.endpoint + "\"");
  }
  return card;
}

}  // namespace shoal::crypto
