#include "model/quantity.h"

#include <cctype>
#include <limits>

#include "common/text.h"

namespace shoal::model {
namespace {

constexpr int64_t kMax = std::numeric_limits<int64_t>::max();

enum class Scaled { kExact, kOverflow, kTooPrecise };

// mantissa * 10^exponent into *out; a value finer than one unit is
// kTooPrecise, or rounded up under Rounding::kUp.
Scaled scale(__int128 mantissa, int exponent, Rounding rounding, int64_t* out) {
  __int128 value = mantissa;
  for (; exponent > 0; --exponent) {
    value *= 10;
    if (value > kMax) return Scaled::kOverflow;
  }
  bool dropped = false;
  for (; exponent < 0 && value != 0; ++exponent) {
    dropped = dropped || value % 10 != 0;
    value /= 10;
  }
  if (dropped) {
    if (rounding == Rounding::kExact) return Scaled::kTooPrecise;
    ++value;
  }
  if (value > kMax) return Scaled::kOverflow;
  *out = static_cast<int64_t>(value);
  return Scaled::kExact;
}

// Thousandths as whole units, refused or rounded up when there is a rest.
Result<int64_t> whole(int64_t milli, Rounding rounding, const std::string& expected, std::string_view text,
                      std::string_view field) {
  if (milli % 1000 == 0) return milli / 1000;
  if (rounding == Rounding::kUp) return milli / 1000 + 1;
  return invalid_argument(std::string(field) + ": expected " + expected + ", got " + quoted_text(text));
}

}  // namespace

Result<int64_t> parse_quantity_milli(std::string_view text, std::string_view field, Rounding rounding) {
  auto fail = [&]() -> Status {
    return invalid_argument(std::string(field) +
                            ": expected a quantity like \"500m\", \"4\" or \"4Gi\", got " + quoted_text(text));
  };
  size_t i = 0;
  if (i < text.size() && text[i] == '+') ++i;
  __int128 mantissa = 0;
  int decimal_digits = 0, digits = 0;
  bool seen_point = false;
  for (; i < text.size(); ++i) {
    char c = text[i];
    if (c == '.' && !seen_point) {
      seen_point = true;
      continue;
    }
    if (!std::isdigit(static_cast<unsigned char>(c))) break;
    if (digits > 30) return fail();
    mantissa = mantissa * 10 + (c - '0');
    ++digits;
    if (seen_point) ++decimal_digits;
  }
  if (digits == 0) return fail();
  std::string_view suffix = text.substr(i);
  // Milli-units: a plain number n is n*1000 thousandths.
  int exponent = 3 - decimal_digits;
  __int128 binary_multiplier = 1;
  if (suffix.empty()) {
  } else if (suffix == "m") {
    exponent -= 3;
  } else if (suffix == "k") {
    exponent += 3;
  } else if (suffix == "M") {
    exponent += 6;
  } else if (suffix == "G") {
    exponent += 9;
  } else if (suffix == "T") {
    exponent += 12;
  } else if (suffix == "P") {
    exponent += 15;
  } else if (suffix == "E") {
    exponent += 18;
  } else if (suffix.size() == 2 && suffix[1] == 'i') {
    const std::string_view binary = "KMGTPE";
    size_t power = binary.find(suffix[0]);
    if (power == std::string_view::npos) return fail();
    binary_multiplier = static_cast<__int128>(1) << (10 * (power + 1));
  } else if (suffix[0] == 'e' || suffix[0] == 'E') {
    std::string_view digits_part = suffix.substr(1);
    bool negative = false;
    if (!digits_part.empty() && (digits_part[0] == '-' || digits_part[0] == '+')) {
      negative = digits_part[0] == '-';
      digits_part.remove_prefix(1);
    }
    if (digits_part.empty() || digits_part.size() > 2) return fail();
    int e = 0;
    for (char c : digits_part) {
      if (!std::isdigit(static_cast<unsigned char>(c))) return fail();
      e = e * 10 + (c - '0');
    }
    exponent += negative ? -e : e;
  } else {
    return fail();
  }
  if (mantissa > kMax) return fail();
  mantissa *= binary_multiplier;
  if (mantissa > static_cast<__int128>(kMax) * 1000) return fail();
  int64_t out = 0;
  switch (scale(mantissa, exponent, rounding, &out)) {
    case Scaled::kExact: return out;
    case Scaled::kOverflow: return fail();
    case Scaled::kTooPrecise: break;
  }
  return invalid_argument(std::string(field) + ": expected at most three decimal places (1m is the finest unit), got " +
                          quoted_text(text));
}

Result<int64_t> parse_cpu_milli(std::string_view text, std::string_view field, Rounding rounding) {
  return parse_quantity_milli(text, field, rounding);
}

Result<int64_t> parse_memory_bytes(std::string_view text, std::string_view field, Rounding rounding) {
  SHOAL_ASSIGN_OR_RETURN(int64_t milli, parse_quantity_milli(text, field, rounding));
  return whole(milli, rounding, "a whole number of bytes", text, field);
}

Result<int64_t> parse_count(std::string_view text, std::string_view field, Rounding rounding) {
  SHOAL_ASSIGN_OR_RETURN(int64_t milli, parse_quantity_milli(text, field, rounding));
  return whole(milli, rounding, "a whole number", text, field);
}

std::string format_cpu(int64_t milli) {
  if (milli % 1000 == 0) return std::to_string(milli / 1000);
  return std::to_string(milli) + "m";
}

std::string format_memory(int64_t bytes) {
  if (bytes == 0) return "0";
  const char* suffixes[] = {"Ki", "Mi", "Gi", "Ti", "Pi", "Ei"};
  int chosen = -1;
  int64_t value = bytes;
  for (int power = 0; power < 6; ++power) {
    if (value % 1024 != 0) break;
    value /= 1024;
    chosen = power;
  }
  if (chosen < 0) return std::to_string(bytes);
  return std::to_string(value) + suffixes[chosen];
}

}  // namespace shoal::model
