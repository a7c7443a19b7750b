// An external agent as a study's subject: a program (a Python agent, a CLI coding agent) run
// once per case in a fresh work folder holding the sample's seeded files, its arguments and
// environment filled from the case, and its transcript read from what it leaves: stdout, an
// events JSONL stream, or an ATIF trajectory file; files it wrote are captured for the file
// scorers. Runs through run_program, so a cancelled or timed-out case kills its process group.
#pragma once

#include <mira/protocol/types.hpp>
#include <mira/study/registry.hpp>
#include <mira/study/sample.hpp>

#include <boost/asio/awaitable.hpp>
#include <boost/system/error_code.hpp>

#include <chrono>
#include <cstddef>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace mira::study {

/// Where the transcript comes from.
enum class transcript_source {
  /// stdout is the final response (trailing whitespace removed).
  stdout_text,
  /// stdout is an events stream (docs/study-agents.md has the line shape).
  stdout_events,
  /// The agent writes an events stream to the file $MIRA_EVENTS_PATH names.
  events_file,
  /// The agent writes an ATIF trajectory (one JSON document) to the file $MIRA_TRAJECTORY_PATH
  /// names; it is checked with protocol::project and becomes transcript.trajectory.
  trajectory_file,
};

/// Bounds on what is captured from the work folder into transcript.files (path -> contents).
/// A file over a bound, or not UTF-8 text (JSON strings are text), is left out, and
/// transcript.metadata's "files_skipped" object gives its path with the reason.
struct capture_limits {
  std::size_t max_file_bytes = std::size_t{1} << 20;    ///< a larger file is skipped
  std::size_t max_total_bytes = std::size_t{16} << 20;  ///< files past this total are skipped
  std::size_t max_files = 1000;                         ///< files past this count are skipped
};

/// How to run the agent. Placeholders in argv and env values: {prompt}, {workdir}, {eval},
/// {sample}, {target}, {provider}; each argument stays one argument whatever it holds (no
/// shell), and text a placeholder brings in is not expanded again. Any other {...} stays as it is.
struct agent_options {
  /// The program and its arguments. A relative argv[0] with a slash is taken from this
  /// process's working directory (the agent's is its work folder); one without is looked up in
  /// PATH, as run_program does.
  std::vector<std::string> argv{};
  /// Variables added to the agent's environment. The SDK also sets MIRA_WORKDIR, MIRA_EVAL,
  /// MIRA_SAMPLE, MIRA_TARGET, MIRA_PROVIDER, and MIRA_EVENTS_PATH or MIRA_TRAJECTORY_PATH for
  /// those sources.
  std::vector<std::pair<std::string, std::string>> env{};
  /// The prompt written to the agent's stdin (else stdin is empty).
  bool prompt_on_stdin = false;
  transcript_source source = transcript_source::stdout_text;
  /// Files captured after the run: paths or globs relative to the work folder ('*' and '?'
  /// within a name, '**' any number of folders: "out.txt", "src/*.py", "**" for all). Symbolic
  /// links are not followed.
  std::vector<std::string> capture{};
  capture_limits limits{};
  /// The largest events or trajectory file read; a larger one is the case's error.
  std::size_t max_transcript_bytes = std::size_t{64} << 20;
  /// As in program_options: the case's time limit (an infra error), the kill grace, and the
  /// most of stdout and stderr kept.
  std::optional<std::chrono::milliseconds> time_limit{};
  std::chrono::milliseconds kill_grace{2000};
  std::size_t max_output = std::size_t{64} << 20;
  /// Where the case folders are made; std::filesystem::temp_directory_path() (TMPDIR) when unset.
  std::optional<std::filesystem::path> temp_root{};
  /// Keep the case folder of a case that ended with an error (transcript.metadata's "workdir"
  /// says where); removed otherwise, however the case ends.
  bool keep_failed = false;
  /// The seeded files of a sample, for agent_subject; the sample's own `files` when unset.
  std::function<std::vector<seed_file>(const sample&)> files{};
};

/// One case as the agent sees it: what the placeholders stand for and the files to seed.
struct agent_case {
  std::string prompt{};
  std::string eval{};
  std::string sample{};
  std::string target{};
  std::string provider{};
  std::vector<seed_file> files{};
};

/// Why an agent's case failed on the SDK's side, as transcript.metadata's "agent_error" names it
/// (the program's own exit code, signal or time limit are in transcript.error as to_transcript
/// says them).
enum class agent_errc {
  workdir_failed = 1,    ///< the case folder could not be made or seeded
  bad_seed_path,         ///< a seeded path is not a plain relative one, or meets a link
  cannot_start,          ///< the program could not be started
  no_transcript,         ///< the events or trajectory file was not written
  transcript_too_large,  ///< the events or trajectory file is over max_transcript_bytes
  malformed_events,      ///< a line of the events stream is not what the shape says
  malformed_trajectory,  ///< the trajectory is not JSON or not ATIF-v1.x
};

const boost::system::error_category& agent_category() noexcept;
boost::system::error_code make_error_code(agent_errc e) noexcept;
/// The name transcript.metadata's "agent_error" gives a code: "malformed_trajectory", ...
std::string_view to_string(agent_errc e) noexcept;

/// Runs the agent for one case: makes a case folder under temp_root holding `work/` (the
/// agent's working directory, with the seeded files, written by materialize_files) and, outside it,
/// the events or trajectory file's path; runs the program there; builds the transcript from
/// `source`; captures files; removes the folder. The transcript's error says what failed: the
/// program (as to_transcript, with its stderr's last lines), else the SDK's side (metadata
/// "agent_error" set).
///
/// Blocking file I/O (seeding, reading the transcript and the captures) runs on the calling
/// thread, bounded by the limits. Cancellation as run_program: a cancelled case's process group
/// is stopped and reaped, its folder removed, and operation_aborted thrown. An empty argv throws
/// std::invalid_argument.
boost::asio::awaitable<protocol::transcript> run_agent(agent_options options, agent_case c);

/// A subject running the agent for each case: the prompt is the sample's input_text, the files
/// the sample's (or options.files(sample)), the names the case's. An empty argv throws
/// std::invalid_argument.
study::subject agent_subject(agent_options options);

}  // namespace mira::study

/// @cond
template <>
struct boost::system::is_error_code_enum<mira::study::agent_errc> : std::true_type {};
/// @endcond
