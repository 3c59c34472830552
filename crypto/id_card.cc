#include "crypto/id_card.h"

#include <vector>

#include "common/text.h"

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
  card.endpoint = text.substr(start);
  SHOAL_RETURN_IF_ERROR(validate_card_fields(card.cluster, card.org, card.endpoint, "id card"));
  SHOAL_ASSIGN_OR_RETURN(card.public_key, key_from_text(parts[4], "id card public key"));
  return card;
}

Status validate_card_fields(std::string_view cluster, std::string_view org,
                            std::string_view endpoint, std::string_view what) {
  std::string prefix(what);
  SHOAL_RETURN_IF_ERROR(validate_name(cluster, prefix + " cluster"));
  SHOAL_RETURN_IF_ERROR(validate_name(org, prefix + " org"));
  return validate_endpoint(endpoint, prefix + " endpoint");
}

Status validate_endpoint(std::string_view endpoint, std::string_view field) {
  auto fail = [&] {
    return invalid_argument(std::string(field) + ": expected tcp://HOST:PORT with a port from 1 to 65535, got " +
                            quoted_text(endpoint));
  };
  bool printable = endpoint.size() <= 255;
  for (char c : endpoint) printable = printable && c > 0x20 && c < 0x7F;
  size_t colon = endpoint.rfind(':');
  if (!printable || endpoint.rfind("tcp://", 0) != 0 || colon == std::string_view::npos || colon <= 6) {
    return fail();
  }
  std::string_view port = endpoint.substr(colon + 1);
  if (port.empty() || port.size() > 5 || port.find_first_not_of("0123456789") != std::string_view::npos) {
    return fail();
  }
  int number = std::stoi(std::string(port));
  if (number < 1 || number > 65535) return fail();
  return Status::ok();
}

}  // namespace shoal::crypto
