#include "agent/control/client.h"

#include <filesystem>

#include <zmq.hpp>
#include <zmq_addon.hpp>

#include "agent/control/data_dir.h"
#include "common/check.h"
#include "common/text.h"

namespace shoal::control {
namespace {

Status no_agent(const std::string& data_dir) {
  std::string socket_path = control_socket_path(data_dir);
  return Status(ErrorCode::kUnavailable,
                "no agent is running on " + data_dir + " (no control socket at " + socket_path +
                    "); start it with `shoald run --data " + data_dir + "`");
}

// An {"ok": false} reply as the Status it carries.
Result<nlohmann::json> reply_status(const std::string& text) {
  auto json = nlohmann::json::parse(text, nullptr, false);
  if (json.is_discarded() || !json.is_object()) return internal_error("agent reply is not JSON");
  if (!json.contains("ok") || json["ok"] != true) {
    auto text_of = [&json](const char* key, const char* otherwise) {
      auto field = json.find(key);
      return field != json.end() && field->is_string() ? field->get<std::string>() : std::string(otherwise);
    };
    return Status(error_code_from_name(text_of("code", "Internal")), text_of("error", "failed"));
  }
  return json;
}

}  // namespace

Result<nlohmann::json> call_agent(const std::string& data_dir, const nlohmann::json& request,
                                  std::chrono::milliseconds timeout) {
  std::string socket_path = control_socket_path(data_dir);
  if (!std::filesystem::exists(socket_path)) return no_agent(data_dir);
  // JSON carries only UTF-8: a flag that is not is refused here, naming it,
  // rather than aborting in the encoder.
  for (const auto& [key, value] : request.items()) {
    if (value.is_string() && !is_valid_utf8(value.get_ref<const std::string&>())) {
      return invalid_argument(key + ": expected UTF-8 text, got " +
                              quoted_text(value.get_ref<const std::string&>()));
    }
  }
  try {
    zmq::context_t context(1);
    zmq::socket_t socket(context, zmq::socket_type::req);
    socket.set(zmq::sockopt::linger, 0);
    socket.connect(control_endpoint(data_dir));
    std::string body = request.dump();
    socket.send(zmq::buffer(body), zmq::send_flags::none);
    zmq::pollitem_t item{socket.handle(), 0, ZMQ_POLLIN, 0};
    zmq::poll(&item, 1, timeout);
    if (!(item.revents & ZMQ_POLLIN)) {
      return Status(ErrorCode::kUnavailable, "the agent on " + data_dir +
                                                 " did not answer within " +
                                                 std::to_string(timeout.count()) + " ms");
    }
    zmq::message_t reply;
    if (!socket.recv(reply, zmq::recv_flags::none)) {
      return Status(ErrorCode::kUnavailable, "no reply from the agent");
    }
    return reply_status(reply.to_string());
  } catch (const zmq::error_t& e) {
    return Status(ErrorCode::kUnavailable, std::string("control socket: ") + e.what());
  }
}

struct DealerSocket {
  zmq::context_t context{1};
  zmq::socket_t socket{context, zmq::socket_type::dealer};

  explicit DealerSocket(const std::string& data_dir) {
    socket.set(zmq::sockopt::linger, 0);
    socket.connect(control_endpoint(data_dir));
  }
  // A DEALER speaks to the agent's ROUTER as a REQ would: an empty
  // delimiter, then the request.
  void send(const nlohmann::json& request) {
    zmq::multipart_t message;
    message.addstr("");
    message.addstr(request.dump());
    message.send(socket);
  }
  // The body of the next message; nullopt when none came within `timeout`.
  std::optional<std::string> receive(std::chrono::milliseconds timeout) {
    zmq::pollitem_t item{socket.handle(), 0, ZMQ_POLLIN, 0};
    zmq::poll(&item, 1, timeout);
    if (!(item.revents & ZMQ_POLLIN)) return std::nullopt;
    zmq::multipart_t message(socket);
    return message.empty() ? std::string() : message.back().to_string();
  }
};

Pipeline::Pipeline(std::unique_ptr<DealerSocket> socket, std::string data_dir)
    : socket_(std::move(socket)), data_dir_(std::move(data_dir)) {}
Pipeline::Pipeline(Pipeline&&) noexcept = default;
Pipeline& Pipeline::operator=(Pipeline&&) noexcept = default;
Pipeline::~Pipeline() = default;

Result<Pipeline> Pipeline::open(const std::string& data_dir) {
  if (!std::filesystem::exists(control_socket_path(data_dir))) return no_agent(data_dir);
  try {
    return Pipeline(std::make_unique<DealerSocket>(data_dir), data_dir);
  } catch (const zmq::error_t& e) {
    return Status(ErrorCode::kUnavailable, std::string("control socket: ") + e.what());
  }
}

Status Pipeline::send_encoded(const nlohmann::json& request) {
  try {
    socket_->send(request);
  } catch (const zmq::error_t& e) {
    return Status(ErrorCode::kUnavailable, std::string("control socket: ") + e.what());
  } catch (const nlohmann::json::exception& e) {  // text that is not UTF-8
    return invalid_argument(std::string("control request: ") + e.what());
  }
  ++in_flight_;
  return Status::ok();
}

Result<nlohmann::json> Pipeline::next(std::chrono::milliseconds timeout) {
  SHOAL_CHECK(in_flight_ > 0, "Pipeline::next with no request awaiting its answer");
  try {
    std::optional<std::string> reply = socket_->receive(timeout);
    if (!reply) {
      return Status(ErrorCode::kUnavailable, "the agent on " + data_dir_ + " did not answer within " +
                                                 std::to_string(timeout.count()) + " ms");
    }
    --in_flight_;
    return reply_status(*reply);
  } catch (const zmq::error_t& e) {
    return Status(ErrorCode::kUnavailable, std::string("control socket: ") + e.what());
  }
}

WorkloadWatch::WorkloadWatch(std::unique_ptr<DealerSocket> socket) : socket_(std::move(socket)) {}
WorkloadWatch::WorkloadWatch(WorkloadWatch&&) noexcept = default;
WorkloadWatch& WorkloadWatch::operator=(WorkloadWatch&&) noexcept = default;
WorkloadWatch::~WorkloadWatch() = default;

Result<WorkloadWatch> WorkloadWatch::open(const std::string& data_dir,
                                          const WatchWorkloadsRequest& request,
                                          std::chrono::milliseconds timeout) {
  if (!std::filesystem::exists(control_socket_path(data_dir))) return no_agent(data_dir);
  try {
    auto socket = std::make_unique<DealerSocket>(data_dir);
    socket->send(encode(request));
    WorkloadWatch watch(std::move(socket));
    SHOAL_ASSIGN_OR_RETURN(std::optional<nlohmann::json> started, watch.next(timeout));
    if (!started) {
      return Status(ErrorCode::kUnavailable, "the agent on " + data_dir + " did not answer within " +
                                                 std::to_string(timeout.count()) + " ms");
    }
    return watch;
  } catch (const zmq::error_t& e) {
    return Status(ErrorCode::kUnavailable, std::string("control socket: ") + e.what());
  }
}

Result<std::optional<nlohmann::json>> WorkloadWatch::next(std::chrono::milliseconds timeout) {
  try {
    std::optional<std::string> reply = socket_->receive(timeout);
    if (!reply) return std::optional<nlohmann::json>();
    SHOAL_ASSIGN_OR_RETURN(nlohmann::json body, reply_status(*reply));
    nlohmann::json items = body.value("items", nlohmann::json::array());
    return std::optional<nlohmann::json>(std::move(items));
  } catch (const zmq::error_t& e) {
    return Status(ErrorCode::kUnavailable, std::string("control socket: ") + e.what());
  }
}

}  // namespace shoal::control
