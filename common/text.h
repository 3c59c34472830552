// Checks on text that crosses a trust boundary (flags, tokens, id cards,
// manifests, wire messages), shared so that every boundary applies the same
// rule and quotes bad input the same way.
#pragma once

#include <string>
#include <string_view>

#include "common/status.h"

namespace shoal {

// Whether `text` is well-formed UTF-8 (RFC 3629: shortest forms only, no
// surrogates, nothing above U+10FFFF). When it is not and `bad_offset` is
// given, it receives the offset of the first byte that breaks the rule.
bool is_valid_utf8(std::string_view text, size_t* bad_offset = nullptr);

// "`what`: line L: expected UTF-8 text (column C is not)" for the first
// byte of `text` that breaks UTF-8, lines counted from `first_line`.
Status validate_utf8_lines(std::string_view text, std::string_view what, int first_line = 1);

// `text` in double quotes, fit for a one-line error: control characters and
// bytes that are not UTF-8 appear as \xNN, quotes and backslashes are
// escaped, and anything past `max_bytes` is cut with "...".
std::string quoted_text(std::string_view text, size_t max_bytes = 80);

// The rule for every name shoal handles (cluster, org, namespace, workload,
// queue, node): a DNS label, 1-63 lowercase letters, digits and '-',
// starting and ending with a letter or digit. `field` names the input in the
// error: `--org: expected lowercase letters, ... got "Acme Corp"`.
Status validate_name(std::string_view value, std::string_view field);
// The same rule's complaint without a field ("expected lowercase letters,
// ..., got \"A B\""), or "" when `value` keeps it: for callers that name
// the field themselves (a command-line option).
std::string name_rule_violation(std::string_view value);
// Checks a Kubernetes object name that is a DNS subdomain (a Secret's, a
// PriorityClass's): dot-separated lowercase labels, at most 253 characters.
Status validate_dns_subdomain(std::string_view value, std::string_view field);
// Checks one label as Kubernetes accepts it (the API server answers 422
// otherwise): the key an optional DNS-subdomain prefix and '/', then a name
// of 1-63 letters, digits, '-', '_' or '.' that starts and ends with a letter
// or digit; the value empty or such a name. `field` names the labels.
Status validate_kubernetes_label(std::string_view key, std::string_view value, std::string_view field);

}  // namespace shoal
