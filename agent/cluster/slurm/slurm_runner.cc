#include "agent/cluster/slurm/slurm_runner.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "agent/cluster/exec/log_file.h"
#include "common/file.h"

namespace shoal::cluster::slurm {
namespace {

namespace fs = std::filesystem;

constexpr int64_t kMiB = int64_t{1} << 20;
// A job changed within this many seconds before a listing may still be
// missing from it (Slurm's update times are whole seconds): the next
// incremental listing reaches back this far.
constexpr int64_t kListingOverlapSeconds = 2;

int64_t unix_seconds() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// A stable name for files of `key` (a peer's id and a uid, neither of which
// may be trusted to be a file name): FNV-1a, 64 bits, in hex.
std::string file_stem(const std::string& key) {
  uint64_t hash = 1469598103934665603ULL;
  for (char c : key) {
    hash ^= static_cast<unsigned char>(c);
    hash *= 1099511628211ULL;
  }
  char text[17];
  std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(hash));
  return text;
}

// Written and synced, with its directory: once this returns, a crash does
// not undo the file.
Status write_durably(const std::string& path, const std::string& text) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return internal_error("cannot write " + path + ": " + std::strerror(errno));
  bool ok = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size()) &&
            ::fsync(fd) == 0;
  ::close(fd);
  if (!ok) return internal_error("cannot write " + path + ": " + std::strerror(errno));
  int dir = ::open(fs::path(path).parent_path().c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir >= 0) {
    ::fsync(dir);
    ::close(dir);
  }
  return Status::ok();
}

std::string shell_quote(const std::string& word) {
  std::string out = "'";
  for (char c : word) {
    if (c == '\'') {
      out += "'\\''";
    } else {
      out += c;
    }
  }
  return out + "'";
}

model::Resources node_capacity(const SlurmNode& node) {
  return {node.cpus * 1000, node.real_memory_mib * kMiB, 0};
}

bool in_partition(const SlurmNode& node, const std::string& partition) {
  return partition.empty() ||
         std::find(node.partitions.begin(), node.partitions.end(), partition) != node.partitions.end();
}

bool in_partition(const SlurmJob& job, const std::string& partition) {
  if (partition.empty()) return true;
  std::string_view rest = job.partition;
  while (!rest.empty()) {
    size_t comma = rest.find(',');
    if (rest.substr(0, comma) == partition) return true;
    rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
  }
  return false;
}

// Holds room on its nodes: started and not yet ended.
bool holds_room(const SlurmJob& job) { return job.state != "PENDING" && !job.finished(); }

// Ran at all: a job cancelled while PENDING ends without ever starting.
bool has_started(const SlurmJob& job) {
  if (job.state == "PENDING") return false;
  if (job.state == "CANCELLED") return job.start_time > 0 && job.end_time > job.start_time;
  return true;
}

}  // namespace

Result<SlurmClientOptions> client_options(const model::SlurmSpec& spec) {
  SlurmClientOptions options;
  SHOAL_ASSIGN_OR_RETURN(options.endpoint, parse_slurm_endpoint(spec.endpoint));
  options.api_version = spec.api_version;
  options.user_name = spec.user_name;
  options.timeout = spec.timeout;
  if (!spec.token_file.empty()) {
    SHOAL_ASSIGN_OR_RETURN(std::string token,
                           read_bounded_file(spec.token_file, 64 << 10, "spec.slurm.tokenFile"));
    while (!token.empty() && (token.back() == '\n' || token.back() == '\r' || token.back() == ' ')) {
      token.pop_back();
    }
    // `scontrol token` prints SLURM_JWT=...; the file may hold that line.
    if (token.rfind("SLURM_JWT=", 0) == 0) token = token.substr(10);
    if (token.empty()) return invalid_argument("spec.slurm.tokenFile: expected a JWT, got an empty file");
    options.token = token;
  }
  return options;
}

Result<std::vector<model::NodeSpec>> discover_nodes(const model::SlurmSpec& spec) {
  SHOAL_ASSIGN_OR_RETURN(SlurmClientOptions options, client_options(spec));
  SlurmRestClient client(options);
  Result<std::vector<SlurmNode>> nodes = client.nodes();
  if (!nodes.is_ok()) {
    return Status(nodes.status().code(), "cannot read Slurm's nodes from " + spec.endpoint + ": " +
                                             nodes.status().message());
  }
  std::vector<model::NodeSpec> out;
  for (const SlurmNode& node : *nodes) {
    if (!in_partition(node, spec.partition)) continue;
    model::Labels labels;
    if (!spec.partition.empty()) labels["slurm.partition"] = spec.partition;
    out.push_back({node.name, node_capacity(node), std::move(labels)});
  }
  if (out.empty()) {
    return invalid_argument("spec.slurm.partition: Slurm at " + spec.endpoint + " has no nodes" +
                            (spec.partition.empty() ? "" : " in partition \"" + spec.partition + "\""));
  }
  return out;
}

std::string format_tag(const JobTag& tag) {
  return "shoal cluster=" + tag.cluster + " key=" + tag.key + " epoch=" + std::to_string(tag.epoch);
}

std::optional<JobTag> parse_tag(std::string_view comment) {
  constexpr std::string_view kPrefix = "shoal ";
  if (!comment.starts_with(kPrefix)) return std::nullopt;
  std::istringstream words{std::string(comment.substr(kPrefix.size()))};
  JobTag tag;
  std::string word;
  bool has_cluster = false, has_key = false, has_epoch = false;
  while (words >> word) {
    size_t equals = word.find('=');
    if (equals == std::string::npos) return std::nullopt;
    std::string name = word.substr(0, equals), value = word.substr(equals + 1);
    if (name == "cluster") {
      tag.cluster = value;
      has_cluster = !value.empty();
    } else if (name == "key") {
      tag.key = value;
      has_key = !value.empty();
    } else if (name == "epoch") {
      char* end = nullptr;
      errno = 0;
      unsigned long long epoch = std::strtoull(value.c_str(), &end, 10);
      if (value.empty() || errno != 0 || *end != '\0' || value[0] == '-') return std::nullopt;
      tag.epoch = epoch;
      has_epoch = true;
    }
  }
  if (!has_cluster || !has_key || !has_epoch) return std::nullopt;
  return tag;
}

std::string batch_script(const std::vector<std::string>& command,
                         const std::vector<std::string>& args, const GangFiles& gang) {
  std::string words;
  for (const auto& word : command) words += " " + shell_quote(word);
  for (const auto& word : args) words += " " + shell_quote(word);
  if (gang.task_output.empty()) return "#!/bin/sh\nexec" + words + "\n";
  // srun ends the other tasks when one fails (they die of its SIGTERM
  // before writing anything), and itself exits with the largest code, that
  // of a task it killed: the failed task's own code is kept in a file.
  std::string exit_file = shell_quote(gang.exit_codes);
  std::string task = "export SHOAL_REPLICA=$SLURM_PROCID SHOAL_NODE=$SLURMD_NODENAME; \"$@\"; "
                     "code=$?; if [ $code -ne 0 ]; then echo $code >> " + exit_file + "; fi; exit $code";
  return "#!/bin/sh\nsrun --kill-on-bad-exit=1 --output=" + shell_quote(gang.task_output) +
         " /bin/sh -c " + shell_quote(task) + " shoal-replica" + words +
         "\ncode=$?\nif [ -s " + exit_file + " ]; then read first < " + exit_file +
         "; exit \"$first\"; fi\nexit $code\n";
}

Result<std::unique_ptr<SlurmRunner>> SlurmRunner::create(SlurmRunnerOptions options) {
  std::error_code error;
  fs::create_directories(options.state_dir, error);
  if (error) return internal_error("cannot create " + options.state_dir + ": " + error.message());
  if (fs::exists(options.output_dir)) {
    // Jobs' output is read back from here: a folder someone else made (in
    // /var/tmp, say) could hand the agent anyone's files.
    struct stat info {};
    if (::stat(options.output_dir.c_str(), &info) == 0 && info.st_uid != 0 && info.st_uid != ::geteuid()) {
      return invalid_argument("cluster manifest spec.slurm.outputDir: " + options.output_dir +
                              " belongs to uid " + std::to_string(info.st_uid) +
                              ", expected this agent's user or root");
    }
  } else {
    fs::create_directories(options.output_dir, error);
    if (error) return internal_error("cannot create " + options.output_dir + ": " + error.message());
    // Jobs run as Slurm's user for them (over a unix socket, slurmrestd's),
    // not as the agent's: like /tmp, anyone may write, none may remove
    // another's files.
    ::chmod(options.output_dir.c_str(), 01777);
  }
  return std::unique_ptr<SlurmRunner>(new SlurmRunner(std::move(options)));
}

SlurmRunner::SlurmRunner(SlurmRunnerOptions options) : options_(std::move(options)) {
  // Over TCP the jobs run as spec.userName; over a unix socket as
  // slurmrestd's user, learned from the first job this agent submitted.
  job_user_ = options_.spec.user_name;
  if (job_user_.empty()) {
    if (std::optional<std::string> kept = read_text_file(options_.state_dir + "/user")) {
      job_user_ = *kept;
      while (!job_user_.empty() && job_user_.back() == '\n') job_user_.pop_back();
    }
  }
  std::error_code error;
  for (fs::directory_iterator it(options_.state_dir, error), end; !error && it != end;
       it.increment(error)) {
    std::string name = it->path().filename().string();
    size_t dot = name.find('.');
    if (dot == std::string::npos) continue;
    std::string epoch = name.substr(dot + 1);
    if (epoch.empty() || epoch.find_first_not_of("0123456789") != std::string::npos) continue;
    uint64_t& newest = newest_marker_[name.substr(0, dot)];
    newest = std::max<uint64_t>(newest, std::strtoull(epoch.c_str(), nullptr, 10));
  }
  thread_ = std::thread([this] { work(); });
}

SlurmRunner::~SlurmRunner() {
  {
    std::lock_guard lock(mutex_);
    stopping_thread_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

std::string SlurmRunner::marker_path(const std::string& key, uint64_t epoch) const {
  return options_.state_dir + "/" + file_stem(key) + "." + std::to_string(epoch);
}

std::string SlurmRunner::output_path(const std::string& key, uint64_t epoch) const {
  return options_.output_dir + "/" + file_stem(key) + "." + std::to_string(epoch) + ".log";
}

std::string SlurmRunner::replica_output_path(const std::string& key, uint64_t epoch, int replica) const {
  return options_.output_dir + "/" + file_stem(key) + "." + std::to_string(epoch) + "." +
         std::to_string(replica) + ".log";
}

void SlurmRunner::work() {
  SlurmRestClient client(options_.client);
  std::unique_lock lock(mutex_);
  while (!stopping_thread_) {
    lock.unlock();
    cycle(client);
    lock.lock();
    // Woken early by a new command (a launch should not wait out the
    // interval); commands kept for a retry wait for the next poll, so an
    // absent slurmrestd is asked once per interval, not in a spin.
    wake_.wait_for(lock, options_.poll_interval, [&] { return stopping_thread_ || new_command_; });
    new_command_ = false;
  }
}

void SlurmRunner::cycle(SlurmRestClient& client) {
  int64_t started = unix_seconds();
  bool listed;
  int64_t since;
  {
    std::lock_guard lock(mutex_);
    listed = snapshot_.listed;
    since = listed_since_;
  }
  Result<std::vector<SlurmNode>> nodes = client.nodes();
  Result<std::vector<SlurmJob>> jobs =
      nodes.is_ok() ? client.jobs(listed ? since : 0) : Result<std::vector<SlurmJob>>(nodes.status());
  std::deque<Command> commands;
  {
    std::lock_guard lock(mutex_);
    if (!jobs.is_ok()) {
      snapshot_.reachable = jobs.status();
      return;
    }
    snapshot_.reachable = Status::ok();
    snapshot_.nodes = std::move(*nodes);
    for (SlurmJob& job : *jobs) {
      std::optional<JobTag> tag = parse_tag(job.comment);
      if (!tag || tag->cluster != options_.cluster_name || !owned(job)) {
        if (job.state == "PENDING" && in_partition(job, options_.spec.partition)) {
          snapshot_.others_pending.insert(job.job_id);
        } else {
          snapshot_.others_pending.erase(job.job_id);
        }
        continue;
      }
      snapshot_.job_of[{tag->key, tag->epoch}] = job.job_id;
      snapshot_.jobs[job.job_id] = std::move(job);
    }
    submitted_.clear();
    snapshot_.listed = true;
    listed_since_ = started - kListingOverlapSeconds;
    commands.swap(commands_);
  }

  std::deque<Command> retry;
  for (Command& command : commands) {
    std::pair<std::string, uint64_t> copy{command.tag.key, command.tag.epoch};
    if (command.kind == Command::Kind::kSubmit) {
      {
        std::lock_guard lock(mutex_);
        if (snapshot_.job_of.count(copy)) continue;  // an earlier try got through
      }
      std::string marker = marker_path(command.tag.key, command.tag.epoch);
      if (!fs::exists(marker)) {
        if (Status made = write_durably(marker, "submitting\n"); !made.is_ok()) {
          std::lock_guard lock(mutex_);
          snapshot_.refused[copy] = made.message();
          continue;
        }
      }
      Result<int64_t> id = client.submit(command.request);
      // The marker remembers the job's id: how it ended can be read from
      // the completion log if Slurm forgets it while the agent is down.
      if (id.is_ok()) (void)write_durably(marker, std::to_string(*id) + "\n");
      std::lock_guard lock(mutex_);
      if (id.is_ok()) {
        SlurmJob job;
        job.job_id = *id;
        submitted_.insert(*id);
        job.comment = command.request.comment;
        job.state = "PENDING";
        snapshot_.job_of[copy] = *id;
        snapshot_.jobs[*id] = std::move(job);
      } else if (id.status().code() == ErrorCode::kInvalidArgument) {
        snapshot_.refused[copy] = id.status().message();
      } else {
        // No answer: the job may have been accepted all the same. The next
        // listing reaches back before this try and shows it if so.
        snapshot_.reachable = id.status();
        command.tried = true;
        retry.push_back(std::move(command));
      }
      continue;
    }
    // kCancel: every unfinished job of the key in the stopped epochs.
    std::vector<int64_t> victims;
    {
      std::lock_guard lock(mutex_);
      victims = unfinished_jobs(snapshot_, command.tag.key, command.epochs);
    }
    bool again = false;
    for (int64_t id : victims) {
      Status cancelled = client.cancel(id);
      if (!cancelled.is_ok() && cancelled.code() != ErrorCode::kNotFound) again = true;
    }
    if (again) retry.push_back(std::move(command));
  }
  if (!retry.empty()) {
    std::lock_guard lock(mutex_);
    for (auto it = retry.rbegin(); it != retry.rend(); ++it) commands_.push_front(std::move(*it));
  }
}

bool SlurmRunner::owned(const SlurmJob& job) {
  if (submitted_.count(job.job_id)) {
    if (job_user_.empty() && !job.user_name.empty()) {
      job_user_ = job.user_name;
      (void)write_durably(options_.state_dir + "/user", job_user_ + "\n");
    }
    return true;
  }
  if (snapshot_.jobs.count(job.job_id)) return true;
  return job_user_.empty() || job.user_name.empty() || job.user_name == job_user_;
}

std::vector<int64_t> SlurmRunner::unfinished_jobs(const Snapshot& snapshot, const std::string& key,
                                                  Epochs epochs) {
  std::vector<int64_t> ids;
  for (auto it = snapshot.job_of.lower_bound({key, epochs.first});
       it != snapshot.job_of.end() && it->first.first == key && it->first.second <= epochs.last; ++it) {
    if (!snapshot.jobs.at(it->second).finished()) ids.push_back(it->second);
  }
  return ids;
}

Status SlurmRunner::supports(const model::WorkloadSpec& spec) const {
  SHOAL_RETURN_IF_ERROR(Runner::supports(spec));
  if (spec.command.empty()) {
    return invalid_argument("spec.command: the slurm backend needs a command to run");
  }
  if (spec.resources.gpu > 0) {
    return invalid_argument("NeverFits: the slurm backend does not request GPUs yet");
  }
  return Status::ok();
}

Status SlurmRunner::launch(const LaunchRequest& request) {
  if (auto it = runs_.find(request.key); it != runs_.end() && it->second.epoch == request.epoch) {
    return Status::ok();
  }
  SHOAL_RETURN_IF_ERROR(supports(request.spec));
  const model::WorkloadSpec& spec = request.spec;
  Run run;
  run.epoch = request.epoch;
  run.per_node = spec.resources;
  run.nodes = request.nodes;
  // Submitted by an earlier life of this agent: found again by its tag,
  // never submitted a second time.
  if (std::optional<std::string> marker = read_text_file(marker_path(request.key, request.epoch))) {
    run.submitted_before = true;
    run.remembered_job_id = std::atoll(marker->c_str());
    runs_[request.key] = std::move(run);
    return Status::ok();
  }
  uint64_t& newest = newest_marker_[file_stem(request.key)];
  newest = std::max(newest, request.epoch);

  SlurmJobRequest job;
  job.name = "shoal-" + spec.name;
  job.comment = format_tag({options_.cluster_name, request.key, request.epoch});
  job.partition = options_.spec.partition;
  job.account = options_.spec.account;
  const bool gang = request.nodes.size() > 1;
  std::string files = options_.output_dir + "/" + file_stem(request.key) + "." +
                      std::to_string(request.epoch);
  job.script = gang ? batch_script(spec.command, spec.args, {files + ".%t.log", files + ".exit"})
                    : batch_script(spec.command, spec.args);
  job.environment = {{"PATH", "/usr/local/bin:/usr/bin:/bin"},
                     {"SHOAL_CLUSTER", options_.cluster_name},
                     {"SHOAL_SOURCE_CLUSTER", request.source_cluster},
                     {"SHOAL_NAMESPACE", spec.namespace_name},
                     {"SHOAL_WORKLOAD", spec.name},
                     {"SHOAL_UID", request.uid},
                     {"SHOAL_EPOCH", std::to_string(request.epoch)},
                     {"SHOAL_REPLICA", "0"},
                     {"SHOAL_NODE", request.nodes.empty() ? "" : request.nodes.front()}};
  for (const auto& [name, value] : spec.env) job.environment[name] = value;
  job.working_directory = !spec.working_dir.empty() && spec.working_dir[0] == '/'
                              ? spec.working_dir
                              : options_.output_dir;
  job.standard_output = output_path(request.key, request.epoch);
  job.cpus_per_task = std::max<int64_t>(1, (spec.resources.cpu_milli + 999) / 1000);
  int64_t memory_mib = (spec.resources.memory_bytes + kMiB - 1) / kMiB;
  // Where the local scheduler reserved room: Slurm must use those nodes, so
  // that what the agent holds and what Slurm allocates stay one picture. A
  // gang is one job of a task per replica, task i on the i-th reserved node
  // (a node twice for two replicas there): memory then goes per cpu, since
  // a node's share is its tasks'.
  for (const std::string& node : run.nodes) {
    job.node_list += (job.node_list.empty() ? "" : ",") + node;
  }
  if (gang) {
    job.tasks = static_cast<int64_t>(request.nodes.size());
    job.distribution = "arbitrary";
    job.memory_per_cpu_mib = memory_mib > 0 ? (memory_mib + job.cpus_per_task - 1) / job.cpus_per_task : 0;
  } else {
    job.memory_per_node_mib = memory_mib;
  }
  {
    std::lock_guard lock(mutex_);
    commands_.push_back({Command::Kind::kSubmit, {options_.cluster_name, request.key, request.epoch},
                         {}, std::move(job)});
    new_command_ = true;
  }
  wake_.notify_all();
  runs_[request.key] = std::move(run);
  return Status::ok();
}

bool SlurmRunner::stop(const std::string& key, Duration) {
  // Slurm's own KillWait is the grace between its SIGTERM and SIGKILL.
  Stop stop;
  if (auto it = runs_.find(key); it != runs_.end()) {
    stop.run = std::move(it->second);
    runs_.erase(it);
    stop.epochs = {stop.run.epoch, stop.run.epoch};
  } else if (stopping_.count(key)) {
    return true;  // its kStopped is owed to the holding stopped first
  } else {
    // Restored after a restart and never launched: whatever this agent
    // submitted for the key before; nothing runs when it submitted nothing.
    auto newest = newest_marker_.find(file_stem(key));
    if (newest == newest_marker_.end() || newest->second == 0) return true;
    stop.epochs = {0, newest->second};
  }
  {
    std::lock_guard lock(mutex_);
    if (stop.run.epoch != 0) {
      auto pending = std::find_if(commands_.begin(), commands_.end(), [&](const Command& command) {
        return command.kind == Command::Kind::kSubmit && command.tag.key == key &&
               command.tag.epoch == stop.run.epoch;
      });
      if (pending != commands_.end() && !pending->tried) {
        commands_.erase(pending);  // never left this agent: nothing to cancel
        return true;
      }
    }
    commands_.push_back({Command::Kind::kCancel, {options_.cluster_name, key, 0}, stop.epochs, {}});
    new_command_ = true;
  }
  wake_.notify_all();
  stopping_[key].push_back(std::move(stop));
  return false;
}

std::optional<SlurmJob> SlurmRunner::from_completion_log(int64_t job_id) const {
  if (options_.spec.completion_log.empty() || job_id <= 0) return std::nullopt;
  std::ifstream in(options_.spec.completion_log);
  std::string line;
  std::optional<SlurmJob> found;
  while (std::getline(in, line)) {
    std::optional<SlurmJob> record = parse_jobcomp_line(line);
    if (record && record->job_id == job_id) found = std::move(record);
  }
  return found;
}

std::optional<WorkloadEvent> SlurmRunner::outcome(const std::string& key, const Run& run,
                                                  const Snapshot& snapshot, TimePoint now) const {
  std::pair<std::string, uint64_t> copy{key, run.epoch};
  if (auto refused = snapshot.refused.find(copy); refused != snapshot.refused.end()) {
    return WorkloadEvent{key, WorkloadEventKind::kFailed, now, -1, "StartFailed: " + refused->second};
  }
  std::optional<SlurmJob> job;
  if (auto id = snapshot.job_of.find(copy); id != snapshot.job_of.end()) {
    job = snapshot.jobs.at(id->second);
  } else if (!snapshot.listed || !run.submitted_before) {
    return std::nullopt;  // not listed yet, or its submission is under way
  } else if (!(job = from_completion_log(run.remembered_job_id))) {
    return WorkloadEvent{key, WorkloadEventKind::kLost, now, -1,
                         "AgentRestart: submitted to Slurm before the agent restarted, and Slurm "
                         "no longer knows the job" +
                             (run.remembered_job_id > 0
                                  ? " (" + std::to_string(run.remembered_job_id) + ")"
                                  : std::string())};
  }
  if (!job->finished()) return std::nullopt;
  std::string which = "Slurm job " + std::to_string(job->job_id);
  if (job->state == "COMPLETED") return WorkloadEvent{key, WorkloadEventKind::kSucceeded, now, 0, ""};
  if (job->state == "FAILED" && job->signal == 0 && job->exit_code != 0) {
    return WorkloadEvent{key, WorkloadEventKind::kFailed, now, job->exit_code,
                         "exited with code " + std::to_string(job->exit_code) + " (" + which + ")"};
  }
  // Slurm could not start the job at all (its output folder out of the
  // job user's reach, a node that cannot run it): the exit code Slurm gives
  // then (signal 53 and the like) is slurmstepd's, not the job's.
  if (job->state_reason == "JobLaunchFailure") {
    return WorkloadEvent{key, WorkloadEventKind::kFailed, now, -1,
                         "Slurm could not launch it: JobLaunchFailure (" + which + ", " + job->state +
                             "; slurmd's log on node " + (job->nodes.empty() ? "?" : job->nodes) +
                             " says why)"};
  }
  std::string reason = job->state_reason.empty() || job->state_reason == "None"
                           ? ""
                           : ", " + job->state_reason;
  // Ends the job did not cause, whatever signal they came with: its node
  // failed, Slurm's scheduler preempted it, or someone at the cluster
  // cancelled it (a copy this runner stopped is in stopping_, not here).
  EndCause cause = EndCause::kOwn;
  if (job->state == "NODE_FAIL" || job->state == "BOOT_FAIL") {
    cause = EndCause::kNodeFailed;
  } else if (job->state == "PREEMPTED") {
    cause = EndCause::kPreempted;
  } else if (job->state == "CANCELLED") {
    cause = EndCause::kEvicted;
  }
  if (cause != EndCause::kOwn) {
    return WorkloadEvent{key, WorkloadEventKind::kFailed, now, -1,
                         "Slurm: " + job->state + " (" + which + reason + ")", cause};
  }
  if (job->signal != 0) {
    return WorkloadEvent{key, WorkloadEventKind::kFailed, now, 128 + job->signal,
                         "killed by signal " + std::to_string(job->signal) + " (" + which + ", " +
                             job->state + ")"};
  }
  // Slurm ended it otherwise: its time limit, its memory limit, a deadline.
  return WorkloadEvent{key, WorkloadEventKind::kFailed, now, -1,
                       "Slurm: " + job->state + " (" + which + reason + ")"};
}

std::vector<WorkloadEvent> SlurmRunner::observe(TimePoint now) {
  last_observe_ = now;
  if (now >= next_sweep_) {
    next_sweep_ = now + std::chrono::minutes(1);
    sweep_forgotten();
  }
  std::vector<WorkloadEvent> events;
  std::lock_guard lock(mutex_);
  for (auto it = runs_.begin(); it != runs_.end();) {
    // Started once Slurm started it: a job Slurm keeps PENDING (its own
    // limits, or a local user's job that took the room first) is not running.
    if (auto id = snapshot_.job_of.find({it->first, it->second.epoch});
        !it->second.start_reported && id != snapshot_.job_of.end()) {
      const SlurmJob& job = snapshot_.jobs.at(id->second);
      if (has_started(job)) {
        it->second.start_reported = true;
        events.push_back({it->first, WorkloadEventKind::kStarted, now, 0,
                          "slurm: job " + std::to_string(job.job_id) +
                              (job.nodes.empty() ? "" : " on " + job.nodes) + "; " + describe(it->first)});
      }
    }
    std::optional<WorkloadEvent> ended = outcome(it->first, it->second, snapshot_, now);
    if (!ended) {
      ++it;
      continue;
    }
    events.push_back(std::move(*ended));
    it = runs_.erase(it);
  }
  // A stopped copy is gone once no job of its epochs is unfinished
  // (COMPLETING is not: its processes may still run) and no cancel of them
  // is still owed. Oldest first: NodeCluster frees a key's holdings in the
  // order they were stopped.
  if (!snapshot_.listed) return events;
  for (auto it = stopping_.begin(); it != stopping_.end();) {
    const std::string& key = it->first;
    std::deque<Stop>& stops = it->second;
    while (!stops.empty()) {
      Epochs epochs = stops.front().epochs;
      bool cancel_owed = std::any_of(commands_.begin(), commands_.end(), [&](const Command& command) {
        return command.kind == Command::Kind::kCancel && command.tag.key == key &&
               command.epochs.first == epochs.first && command.epochs.last == epochs.last;
      });
      if (cancel_owed || !unfinished_jobs(snapshot_, key, epochs).empty()) break;
      events.push_back({key, WorkloadEventKind::kStopped, now, 0, ""});
      stops.pop_front();
    }
    it = stops.empty() ? stopping_.erase(it) : std::next(it);
  }
  return events;
}

TimePoint SlurmRunner::next_event_at() const {
  if (runs_.empty() && stopping_.empty()) return next_sweep_;
  return std::min(next_sweep_, last_observe_ + options_.poll_interval);
}

std::map<std::string, model::Resources> SlurmRunner::room_taken_by_others() const {
  std::map<std::string, model::Resources> taken;
  std::lock_guard lock(mutex_);
  // What our own started jobs hold, per node, as the local scheduler counts it.
  std::map<std::string, model::Resources> ours;
  auto count = [&](const std::string& key, const Run& run) {
    auto id = snapshot_.job_of.find({key, run.epoch});
    if (id == snapshot_.job_of.end() || !holds_room(snapshot_.jobs.at(id->second))) return;
    for (const std::string& node : run.nodes) ours[node] += run.per_node;
  };
  for (const auto& [key, run] : runs_) count(key, run);
  for (const auto& [key, stops] : stopping_) {
    for (const Stop& stop : stops) count(key, stop.run);
  }
  for (const SlurmNode& node : snapshot_.nodes) {
    if (!in_partition(node, options_.spec.partition)) continue;
    if (!node.usable()) {
      taken[node.name] = node_capacity(node);
      continue;
    }
    model::Resources allocated{node.alloc_cpus * 1000, node.alloc_memory_mib * kMiB, 0};
    taken[node.name] = model::Resources::max(allocated - ours[node.name], {});
  }
  return taken;
}

int64_t SlurmRunner::backlog() const {
  std::lock_guard lock(mutex_);
  return static_cast<int64_t>(snapshot_.others_pending.size());
}

Status SlurmRunner::health() const {
  std::lock_guard lock(mutex_);
  if (snapshot_.reachable.is_ok()) return Status::ok();
  return Status(ErrorCode::kUnavailable, snapshot_.reachable.message());
}

void SlurmRunner::forget(const std::string& key) {
  if (runs_.count(key) || stopping_.count(key)) return;
  {
    std::lock_guard lock(mutex_);
    for (auto it = snapshot_.job_of.begin(); it != snapshot_.job_of.end();) {
      if (it->first.first != key) {
        ++it;
        continue;
      }
      snapshot_.jobs.erase(it->second);
      snapshot_.refused.erase(it->first);
      it = snapshot_.job_of.erase(it);
    }
  }
  // Its output stays readable a while (shoalctl logs of finished work); a
  // later sweep removes it and the markers.
  (void)write_durably(options_.state_dir + "/" + file_stem(key) + ".forgotten", key + "\n");
}

void SlurmRunner::sweep_forgotten() {
  std::error_code error;
  auto now = fs::file_time_type::clock::now();
  std::set<std::string> stems;
  for (fs::directory_iterator it(options_.state_dir, error), end; !error && it != end;
       it.increment(error)) {
    if (it->path().extension() != ".forgotten") continue;
    std::error_code age_error;
    auto when = fs::last_write_time(it->path(), age_error);
    if (!age_error && now - when >= options_.keep_finished) stems.insert(it->path().stem().string());
  }
  if (stems.empty()) return;
  for (const std::string& dir : {options_.state_dir, options_.output_dir}) {
    std::vector<fs::path> doomed;
    for (fs::directory_iterator it(dir, error), end; !error && it != end; it.increment(error)) {
      std::string name = it->path().filename().string();
      if (stems.count(name.substr(0, name.find('.')))) doomed.push_back(it->path());
    }
    for (const fs::path& path : doomed) {
      std::error_code remove_error;
      fs::remove(path, remove_error);
    }
  }
  for (const std::string& stem : stems) newest_marker_.erase(stem);
}

Result<LogChunk> SlurmRunner::read_log(const std::string& key, int replica, int64_t offset,
                                      size_t max_bytes) const {
  if (replica < 0) return not_found("no replica " + std::to_string(replica));
  // The running copy's, else the newest epoch this agent submitted for the key.
  std::optional<uint64_t> epoch;
  if (auto it = runs_.find(key); it != runs_.end()) {
    epoch = it->second.epoch;
  } else if (auto newest = newest_marker_.find(file_stem(key)); newest != newest_marker_.end()) {
    epoch = newest->second;
  }
  if (!epoch) return not_found("no output for " + key + " here");
  bool running = runs_.count(key) > 0 || stopping_.count(key) > 0;
  // A gang's replicas write their own files (empty until srun starts
  // them). A single replica's output is its batch script's, and so is what
  // a gang printed before srun started (its errors, say).
  std::string path = replica_output_path(key, *epoch, replica);
  if (std::error_code missing; !fs::exists(path, missing)) {
    auto run = runs_.find(key);
    bool gang = run != runs_.end() && run->second.nodes.size() > 1;
    if (gang && replica < static_cast<int>(run->second.nodes.size())) {
      // Its file is still to come.
    } else if (replica == 0) {
      path = output_path(key, *epoch);
    } else {
      return not_found("no replica " + std::to_string(replica) + " of " + key + " here");
    }
  }
  return read_log_file(path, offset, max_bytes, !running);
}

std::string SlurmRunner::describe(const std::string&) const {
  return "one batch job in partition " +
         (options_.spec.partition.empty() ? std::string("(Slurm's default)") : options_.spec.partition) +
         "; Slurm enforces cpu and memory as it is configured to";
}

std::string SlurmRunner::unstarted_reason(const std::string& key) const {
  auto run = runs_.find(key);
  if (run == runs_.end()) return "";
  std::lock_guard lock(mutex_);
  auto id = snapshot_.job_of.find({key, run->second.epoch});
  if (id == snapshot_.job_of.end()) return "";
  const SlurmJob& job = snapshot_.jobs.at(id->second);
  if (job.state != "PENDING" || job.state_reason.empty() || job.state_reason == "None") return "";
  return "Slurm job " + std::to_string(job.job_id) + " pending: " + job.state_reason;
}

}  // namespace shoal::cluster::slurm
