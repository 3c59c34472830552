#include "agent/cluster/slurm/slurm_rest.h"

#include <sys/wait.h>

#include <algorithm>
#include <nlohmann/json.hpp>

namespace shoal::cluster::slurm {

using json = nlohmann::json;

Result<SlurmEndpoint> parse_slurm_endpoint(const std::string& text, const std::string& field) {
  constexpr std::string_view kUnix = "unix://";
  constexpr std::string_view kHttp = "http://";
  SlurmEndpoint endpoint;
  if (text.starts_with(kUnix) && text.size() > kUnix.size() + 1 && text[kUnix.size()] == '/') {
    endpoint.unix_socket = text.substr(kUnix.size());
    endpoint.base_url = "http://localhost";
    return endpoint;
  }
  if (text.starts_with(kHttp) && text.size() > kHttp.size()) {
    std::string rest = text.substr(kHttp.size());
    while (!rest.empty() && rest.back() == '/') rest.pop_back();
    if (!rest.empty() && rest.find('/') == std::string::npos) {
      endpoint.base_url = std::string(kHttp) + rest;
      return endpoint;
    }
  }
  return invalid_argument(field + ": expected unix:///path/to/slurmrestd.sock or http://host:port, got '" +
                          text + "'");
}

bool SlurmNode::usable() const {
  if (state != "idle" && state != "mixed" && state != "allocated") return false;
  for (const std::string& flag : state_flags) {
    if (flag == "DRAIN" || flag == "DRAINING" || flag == "DRAINED" || flag == "FAIL" ||
        flag == "NOT_RESPONDING" || flag == "MAINTENANCE" || flag == "POWERED_DOWN" ||
        flag == "REBOOT_REQUESTED") {
      return false;
    }
  }
  return true;
}

bool SlurmJob::finished() const {
  return state == "COMPLETED" || state == "FAILED" || state == "CANCELLED" || state == "TIMEOUT" ||
         state == "NODE_FAIL" || state == "OUT_OF_MEMORY" || state == "BOOT_FAIL" ||
         state == "DEADLINE" || state == "PREEMPTED";
}

namespace {

// A field of slurmrestd's answer; a wrong type is an error naming it.
template <typename T>
Result<T> field_of(const json& object, const char* name, const char* where) {
  auto it = object.find(name);
  if (it == object.end() || it->is_null()) return T{};
  try {
    return it->get<T>();
  } catch (const json::exception&) {
    return invalid_argument(std::string(where) + "." + name + ": expected " +
                            (std::is_same_v<T, std::string> ? "a string" : "a number") + ", got " +
                            it->type_name());
  }
}

Result<json> parse_object(std::string_view body, const char* what) {
  json parsed = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (parsed.is_discarded() || !parsed.is_object()) {
    return invalid_argument(std::string(what) + ": expected a JSON object from slurmrestd");
  }
  return parsed;
}

Result<const json*> list_of(const json& answer, const char* name) {
  auto it = answer.find(name);
  if (it == answer.end() || !it->is_array()) {
    return invalid_argument(std::string(name) + ": expected a list in slurmrestd's answer");
  }
  return &*it;
}

void split_wait_status(int64_t status, SlurmJob& job) {
  auto raw = static_cast<int>(status);
  if (WIFSIGNALED(raw)) {
    job.signal = WTERMSIG(raw);
  } else {
    job.exit_code = WEXITSTATUS(raw);
  }
}

}  // namespace

Result<std::vector<SlurmNode>> parse_nodes(std::string_view body) {
  SHOAL_ASSIGN_OR_RETURN(json answer, parse_object(body, "nodes"));
  SHOAL_ASSIGN_OR_RETURN(const json* list, list_of(answer, "nodes"));
  std::vector<SlurmNode> nodes;
  for (const json& item : *list) {
    if (!item.is_object()) return invalid_argument("nodes[]: expected an object");
    SlurmNode node;
    SHOAL_ASSIGN_OR_RETURN(node.name, field_of<std::string>(item, "name", "nodes[]"));
    SHOAL_ASSIGN_OR_RETURN(node.state, field_of<std::string>(item, "state", "nodes[]"));
    SHOAL_ASSIGN_OR_RETURN(node.cpus, field_of<int64_t>(item, "cpus", "nodes[]"));
    SHOAL_ASSIGN_OR_RETURN(node.alloc_cpus, field_of<int64_t>(item, "alloc_cpus", "nodes[]"));
    SHOAL_ASSIGN_OR_RETURN(node.real_memory_mib, field_of<int64_t>(item, "real_memory", "nodes[]"));
    SHOAL_ASSIGN_OR_RETURN(node.alloc_memory_mib,
                           field_of<int64_t>(item, "alloc_memory", "nodes[]"));
    SHOAL_ASSIGN_OR_RETURN(node.reason, field_of<std::string>(item, "reason", "nodes[]"));
    if (auto flags = item.find("state_flags"); flags != item.end() && flags->is_array()) {
      for (const json& flag : *flags) {
        if (flag.is_string()) node.state_flags.push_back(flag.get<std::string>());
      }
    }
    if (auto partitions = item.find("partitions"); partitions != item.end() && partitions->is_array()) {
      for (const json& partition : *partitions) {
        if (partition.is_string()) node.partitions.push_back(partition.get<std::string>());
      }
    }
    if (node.name.empty()) return invalid_argument("nodes[].name: expected a node name");
    nodes.push_back(std::move(node));
  }
  return nodes;
}

Result<std::vector<SlurmJob>> parse_jobs(std::string_view body) {
  if (body.find_first_not_of(" \t\r\n") == std::string_view::npos) {
    return std::vector<SlurmJob>{};
  }
  SHOAL_ASSIGN_OR_RETURN(json answer, parse_object(body, "jobs"));
  SHOAL_ASSIGN_OR_RETURN(const json* list, list_of(answer, "jobs"));
  std::vector<SlurmJob> jobs;
  for (const json& item : *list) {
    if (!item.is_object()) return invalid_argument("jobs[]: expected an object");
    SlurmJob job;
    SHOAL_ASSIGN_OR_RETURN(job.job_id, field_of<int64_t>(item, "job_id", "jobs[]"));
    SHOAL_ASSIGN_OR_RETURN(job.name, field_of<std::string>(item, "name", "jobs[]"));
    SHOAL_ASSIGN_OR_RETURN(job.comment, field_of<std::string>(item, "comment", "jobs[]"));
    SHOAL_ASSIGN_OR_RETURN(job.user_name, field_of<std::string>(item, "user_name", "jobs[]"));
    SHOAL_ASSIGN_OR_RETURN(job.partition, field_of<std::string>(item, "partition", "jobs[]"));
    SHOAL_ASSIGN_OR_RETURN(job.state, field_of<std::string>(item, "job_state", "jobs[]"));
    SHOAL_ASSIGN_OR_RETURN(job.state_reason, field_of<std::string>(item, "state_reason", "jobs[]"));
    SHOAL_ASSIGN_OR_RETURN(int64_t wait_status, field_of<int64_t>(item, "exit_code", "jobs[]"));
    split_wait_status(wait_status, job);
    SHOAL_ASSIGN_OR_RETURN(job.nodes, field_of<std::string>(item, "nodes", "jobs[]"));
    SHOAL_ASSIGN_OR_RETURN(job.start_time, field_of<int64_t>(item, "start_time", "jobs[]"));
    SHOAL_ASSIGN_OR_RETURN(job.end_time, field_of<int64_t>(item, "end_time", "jobs[]"));
    SHOAL_ASSIGN_OR_RETURN(job.standard_output,
                           field_of<std::string>(item, "standard_output", "jobs[]"));
    if (job.job_id <= 0) return invalid_argument("jobs[].job_id: expected a positive job id");
    jobs.push_back(std::move(job));
  }
  return jobs;
}

Result<int64_t> parse_submitted_job_id(std::string_view body) {
  SHOAL_ASSIGN_OR_RETURN(json answer, parse_object(body, "job/submit"));
  std::string errors = slurm_errors(body);
  if (!errors.empty()) return invalid_argument("job/submit: " + errors);
  SHOAL_ASSIGN_OR_RETURN(int64_t id, field_of<int64_t>(answer, "job_id", "job/submit"));
  if (id <= 0) return invalid_argument("job/submit.job_id: expected a positive job id");
  return id;
}

std::string slurm_errors(std::string_view body) {
  json answer = json::parse(body, nullptr, false);
  if (answer.is_discarded() || !answer.is_object()) return "";
  auto errors = answer.find("errors");
  if (errors == answer.end() || !errors->is_array()) return "";
  std::string out;
  for (const json& error : *errors) {
    if (!error.is_object()) continue;
    // Anyone's answer may put a number where the text belongs: only text is read.
    auto text_of = [&error](const char* key) {
      auto field = error.find(key);
      return field != error.end() && field->is_string() ? field->get<std::string>() : std::string();
    };
    std::string text = text_of("description");
    if (text.empty()) text = text_of("error");
    if (text.empty()) continue;
    if (!out.empty()) out += "; ";
    out += text;
  }
  return out;
}

std::string encode_submit(const SlurmJobRequest& request) {
  json job = {{"name", request.name},
              {"comment", request.comment},
              {"tasks", request.tasks},
              {"cpus_per_task", request.cpus_per_task},
              {"current_working_directory", request.working_directory},
              // slurmrestd refuses a submission without an environment (400).
              {"environment", request.environment.empty()
                                  ? json{{"PATH", "/usr/local/bin:/usr/bin:/bin"}}
                                  : json(request.environment)}};
  if (!request.partition.empty()) job["partition"] = request.partition;
  if (!request.account.empty()) job["account"] = request.account;
  if (!request.standard_output.empty()) job["standard_output"] = request.standard_output;
  if (!request.standard_error.empty()) job["standard_error"] = request.standard_error;
  if (request.memory_per_node_mib > 0) job["memory_per_node"] = request.memory_per_node_mib;
  if (request.memory_per_cpu_mib > 0) job["memory_per_cpu"] = request.memory_per_cpu_mib;
  if (!request.distribution.empty()) job["distribution"] = request.distribution;
  // v0.0.38 disables "required_nodes"; "node_list" is its ReqNodeList.
  if (!request.node_list.empty()) job["node_list"] = request.node_list;
  return json{{"script", request.script}, {"job", job}}.dump();
}

std::optional<SlurmJob> parse_jobcomp_line(std::string_view line) {
  // Space-separated Key=Value; values have no spaces in what we read.
  std::map<std::string, std::string, std::less<>> fields;
  size_t at = 0;
  while (at < line.size()) {
    size_t end = line.find(' ', at);
    if (end == std::string_view::npos) end = line.size();
    std::string_view word = line.substr(at, end - at);
    if (size_t equals = word.find('='); equals != std::string_view::npos) {
      fields.emplace(std::string(word.substr(0, equals)), std::string(word.substr(equals + 1)));
    }
    at = end + 1;
  }
  auto id = fields.find("JobId");
  auto state = fields.find("JobState");
  if (id == fields.end() || state == fields.end()) return std::nullopt;
  SlurmJob job;
  try {
    size_t used = 0;
    job.job_id = std::stoll(id->second, &used);
    if (used != id->second.size() || job.job_id <= 0) return std::nullopt;
  } catch (const std::exception&) {
    return std::nullopt;
  }
  job.state = state->second;
  if (auto name = fields.find("Name"); name != fields.end()) job.name = name->second;
  if (auto nodes = fields.find("NodeList"); nodes != fields.end()) job.nodes = nodes->second;
  // ExitCode=<code>:<signal>, already split (unlike the REST record).
  if (auto code = fields.find("ExitCode"); code != fields.end()) {
    int exit_code = 0, signal = 0;
    if (std::sscanf(code->second.c_str(), "%d:%d", &exit_code, &signal) == 2) {
      job.exit_code = exit_code;
      job.signal = signal;
    }
  }
  return job;
}

// ---- the client ------------------------------------------------------------

namespace {

http::Endpoint endpoint_of(const SlurmClientOptions& options) {
  http::Endpoint endpoint;
  endpoint.base_url = options.endpoint.base_url + "/slurm/" + options.api_version;
  endpoint.unix_socket = options.endpoint.unix_socket;
  endpoint.name = "slurmrestd";
  return endpoint;
}

}  // namespace

SlurmRestClient::SlurmRestClient(SlurmClientOptions options)
    : options_(std::move(options)), http_(endpoint_of(options_)) {}

Result<SlurmRestClient::Answer> SlurmRestClient::call(const char* method, const std::string& path,
                                                      const std::string& body) {
  http::Request request;
  request.method = method;
  request.path = path;
  request.headers.push_back("Content-Type: application/json");
  if (!options_.token.empty()) {
    request.headers.push_back("X-SLURM-USER-NAME: " + options_.user_name);
    request.headers.push_back("X-SLURM-USER-TOKEN: " + options_.token);
  }
  request.body = body;
  request.timeout = options_.timeout;
  request.connect_timeout = options_.timeout;
  return http_.call(request);
}

namespace {

// An HTTP error as one line, with slurmrestd's own words when it gave some.
Status answer_error(const char* what, long status, const std::string& body) {
  std::string errors = slurm_errors(body);
  return Status(status == 404 ? ErrorCode::kNotFound : ErrorCode::kUnavailable,
                std::string("slurmrestd: ") + what + ": HTTP " + std::to_string(status) +
                    (errors.empty() ? "" : ": " + errors));
}

}  // namespace

Status SlurmRestClient::ping() {
  SHOAL_ASSIGN_OR_RETURN(Answer answer, call("GET", "/ping", ""));
  if (answer.status != 200) return answer_error("ping", answer.status, answer.body);
  return Status::ok();
}

Result<std::vector<SlurmNode>> SlurmRestClient::nodes() {
  SHOAL_ASSIGN_OR_RETURN(Answer answer, call("GET", "/nodes", ""));
  if (answer.status != 200) return answer_error("nodes", answer.status, answer.body);
  return parse_nodes(answer.body);
}

Result<std::vector<SlurmJob>> SlurmRestClient::jobs(int64_t since) {
  std::string path = since > 0 ? "/jobs?update_time=" + std::to_string(since) : "/jobs";
  SHOAL_ASSIGN_OR_RETURN(Answer answer, call("GET", path, ""));
  // "Nothing changed since" is 304 with an empty body.
  if (answer.status == 304) return std::vector<SlurmJob>{};
  if (answer.status != 200) return answer_error("jobs", answer.status, answer.body);
  return parse_jobs(answer.body);
}

Result<SlurmJob> SlurmRestClient::job(int64_t job_id) {
  SHOAL_ASSIGN_OR_RETURN(Answer answer, call("GET", "/job/" + std::to_string(job_id), ""));
  // slurmrestd 22.05 answers an unknown job id with 500 and "Invalid job id".
  if (answer.status != 200) {
    if (slurm_errors(answer.body).find("Unable to find JobId") != std::string::npos) {
      return not_found("slurm job " + std::to_string(job_id) + " is no longer known to Slurm");
    }
    return answer_error("job", answer.status, answer.body);
  }
  SHOAL_ASSIGN_OR_RETURN(std::vector<SlurmJob> jobs, parse_jobs(answer.body));
  for (SlurmJob& job : jobs) {
    if (job.job_id == job_id) return std::move(job);
  }
  return not_found("slurm job " + std::to_string(job_id) + " is no longer known to Slurm");
}

Result<int64_t> SlurmRestClient::submit(const SlurmJobRequest& request) {
  SHOAL_ASSIGN_OR_RETURN(Answer answer, call("POST", "/job/submit", encode_submit(request)));
  if (answer.status != 200) {
    // An answer with Slurm's errors is a refusal of this job (bad partition,
    // a node configuration it cannot have); one without, or about the
    // controller, is Slurm being unavailable.
    std::string errors = slurm_errors(answer.body);
    if (errors.empty() || errors.find("Unable to contact") != std::string::npos) {
      return answer_error("job/submit", answer.status, answer.body);
    }
    return invalid_argument("Slurm refused the job: " + errors);
  }
  return parse_submitted_job_id(answer.body);
}

Status SlurmRestClient::cancel(int64_t job_id) {
  SHOAL_ASSIGN_OR_RETURN(Answer answer, call("DELETE", "/job/" + std::to_string(job_id), ""));
  if (answer.status != 200) return answer_error("cancel", answer.status, answer.body);
  return Status::ok();
}

}  // namespace shoal::cluster::slurm
