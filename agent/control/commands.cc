#include "agent/control/commands.h"

#include <array>
#include <utility>

namespace shoal::control {

using nlohmann::json;

namespace {

constexpr std::array<CommandInfo, 25> kCommands = {{
    {Command::kIdentity, "identity", Access::kRead, Replies::kOne},
    {Command::kInviteCreate, "invite-create", Access::kWrite, Replies::kOne},
    {Command::kInviteAccept, "invite-accept", Access::kWrite, Replies::kOne},
    {Command::kInviteList, "invite-list", Access::kRead, Replies::kOne},
    {Command::kInviteRevoke, "invite-revoke", Access::kWrite, Replies::kOne},
    {Command::kDescribePeer, "describe-peer", Access::kRead, Replies::kOne},
    {Command::kPeers, "peers", Access::kRead, Replies::kOne},
    {Command::kSubmit, "submit", Access::kWrite, Replies::kOne},
    {Command::kGetWorkloads, "get-workloads", Access::kRead, Replies::kOne},
    {Command::kGetReservations, "get-reservations", Access::kRead, Replies::kOne},
    {Command::kGetClusters, "get-clusters", Access::kRead, Replies::kOne},
    {Command::kNominate, "nominate", Access::kWrite, Replies::kOne},
    {Command::kPatchWorkload, "patch-workload", Access::kWrite, Replies::kOne},
    {Command::kDeleteWorkload, "delete-workload", Access::kWrite, Replies::kOne},
    {Command::kLogs, "logs", Access::kRead, Replies::kOne},
    {Command::kDescribeWorkload, "describe-workload", Access::kRead, Replies::kOne},
    {Command::kStatus, "status", Access::kRead, Replies::kOne},
    // A read-only agent commits no batches, so a watch would hear of
    // nothing: it is refused with the reason instead.
    {Command::kWatchWorkloads, "watch-workloads", Access::kWrite, Replies::kStream},
    // The copy is of what is committed, which a read-only agent still has.
    {Command::kBackup, "backup", Access::kRead, Replies::kOne},
    {Command::kMetrics, "metrics", Access::kRead, Replies::kOne},
    {Command::kRoutingMetrics, "routing-metrics", Access::kRead, Replies::kOne},
    {Command::kQuotaSet, "quota-set", Access::kWrite, Replies::kOne},
    {Command::kQuotaDelete, "quota-delete", Access::kWrite, Replies::kOne},
    {Command::kGetQuotas, "get-quotas", Access::kRead, Replies::kOne},
    {Command::kPeerForget, "peer-forget", Access::kWrite, Replies::kOne},
}};

constexpr bool table_in_enum_order() {
  for (size_t i = 0; i < kCommands.size(); ++i) {
    if (static_cast<size_t>(kCommands[i].command) != i) return false;
  }
  return static_cast<size_t>(Command::kPeerForget) + 1 == kCommands.size();
}
static_assert(table_in_enum_order(), "kCommands lists every Command once, in the enum's order");

class Encoder final : public FieldVisitor {
 public:
  explicit Encoder(json& out) : out_(out) {}
  void text(const char* key, std::string& value) override { out_[key] = value; }
  void optional_text(const char* key, std::string& value) override { out_[key] = value; }
  void texts(const char* key, std::vector<std::string>& value) override { out_[key] = value; }
  void count(const char* key, int64_t& value, int64_t, int64_t) override { out_[key] = value; }
  void flag(const char* key, bool& value) override { out_[key] = value; }
  void object(const char* key, json& value) override { out_[key] = value; }
  void optional_list(const char* key, json& value) override {
    if (!value.is_null()) out_[key] = value;
  }

 private:
  json& out_;
};

// Keeps the first error; after it, the rest of the fields are not read.
class Decoder final : public FieldVisitor {
 public:
  explicit Decoder(const json& body) : body_(body) {}
  Status status() const { return status_; }

  void text(const char* key, std::string& value) override {
    if (!status_.is_ok()) return;
    if (!body_.contains(key)) return fail(key, "expected a string, and it is missing");
    optional_text(key, value);
  }
  void optional_text(const char* key, std::string& value) override {
    const json* given = find(key);
    if (!given) return;
    if (!given->is_string()) return fail(key, "expected a string");
    value = given->get<std::string>();
  }
  void texts(const char* key, std::vector<std::string>& value) override {
    if (!status_.is_ok()) return;
    auto it = body_.find(key);
    if (it == body_.end() || !it->is_array()) return fail(key, "expected a list of strings");
    std::vector<std::string> out;
    for (const auto& item : *it) {
      if (!item.is_string()) return fail(key, "expected a list of strings");
      out.push_back(item.get<std::string>());
    }
    value = std::move(out);
  }
  void count(const char* key, int64_t& value, int64_t low, int64_t high) override {
    const json* given = find(key);
    if (!given) return;
    if (!given->is_number_integer() || given->get<int64_t>() < low || given->get<int64_t>() > high) {
      return fail(key, "expected a whole number from " + std::to_string(low) + " to " +
                           std::to_string(high));
    }
    value = given->get<int64_t>();
  }
  void flag(const char* key, bool& value) override {
    const json* given = find(key);
    if (!given) return;
    if (!given->is_boolean()) return fail(key, "expected true or false");
    value = given->get<bool>();
  }
  void object(const char* key, json& value) override {
    if (!status_.is_ok()) return;
    auto it = body_.find(key);
    if (it == body_.end() || !it->is_object()) return fail(key, "expected an object");
    value = *it;
  }
  void optional_list(const char* key, json& value) override {
    const json* given = find(key);
    if (!given) return;
    if (!given->is_array()) return fail(key, "expected a list");
    value = *given;
  }

 private:
  // The field when present, not null, and no earlier field failed.
  const json* find(const char* key) {
    if (!status_.is_ok()) return nullptr;
    auto it = body_.find(key);
    if (it == body_.end() || it->is_null()) return nullptr;
    return &*it;
  }
  void fail(const char* key, const std::string& what) {
    status_ = invalid_argument(std::string("control request field \"") + key + "\": " + what);
  }

  const json& body_;
  Status status_ = Status::ok();
};

template <size_t... I>
constexpr bool requests_in_enum_order(std::index_sequence<I...>) {
  return ((static_cast<size_t>(std::tuple_element_t<I, AllRequests>::kCommand) == I) && ...);
}
static_assert(std::tuple_size_v<AllRequests> == kCommands.size() &&
                  requests_in_enum_order(std::make_index_sequence<kCommands.size()>()),
              "AllRequests lists one request per Command, in the enum's order");

template <class... Requests>
Status decode_as(Command command, const json& body, std::tuple<Requests...>*) {
  Status status = Status::ok();
  (void)((Requests::kCommand == command ? (status = decode<Requests>(body).status(), true) : false) ||
         ...);
  return status;
}

}  // namespace

std::span<const CommandInfo> commands() { return kCommands; }

const CommandInfo& info(Command command) { return kCommands[static_cast<size_t>(command)]; }

std::optional<Command> command_named(std::string_view name) {
  for (const CommandInfo& command : kCommands) {
    if (command.name == name) return command.command;
  }
  return std::nullopt;
}

json encode_fields(Command command, const std::function<void(FieldVisitor&)>& visit) {
  json out = json::object();
  out["command"] = std::string(info(command).name);
  Encoder encoder(out);
  visit(encoder);
  return out;
}

Status decode_fields(const json& body, const std::function<void(FieldVisitor&)>& visit) {
  if (!body.is_object()) return invalid_argument("control request: expected a JSON object");
  Decoder decoder(body);
  visit(decoder);
  return decoder.status();
}

Result<json> parse_request(std::string_view text) {
  bool too_deep = false;
  json request = json::parse(
      text,
      [&](int depth, json::parse_event_t, json&) {
        too_deep = too_deep || depth > kMaxRequestDepth;
        return !too_deep;  // past the limit, nothing more is kept
      },
      /*allow_exceptions=*/false);
  if (too_deep) {
    return invalid_argument("control request: nested deeper than " + std::to_string(kMaxRequestDepth) +
                            " levels");
  }
  if (request.is_discarded()) return invalid_argument("control request: not JSON");
  return request;
}

Status check_request(const json& body) {
  if (!body.is_object()) return invalid_argument("control request: expected a JSON object");
  auto name = body.find("command");
  if (name == body.end() || !name->is_string()) {
    return invalid_argument("control request field \"command\": expected a string naming a command");
  }
  std::optional<Command> command = command_named(name->get_ref<const std::string&>());
  if (!command) return invalid_argument("control request field \"command\": unknown command");
  return decode_as(*command, body, static_cast<AllRequests*>(nullptr));
}

bool is_read_only_command(const json& request) {
  if (!request.is_object()) return false;
  auto name = request.find("command");
  if (name == request.end() || !name->is_string()) return false;
  std::optional<Command> command = command_named(name->get_ref<const std::string&>());
  return command && info(*command).access == Access::kRead;
}

}  // namespace shoal::control
