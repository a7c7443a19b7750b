// Sans-I/O core of one study connection: the outgoing frame queue, the id -> request table,
// classification of inbound lines and the cancellation rules. No executor and no handlers:
// the coroutine shell (src/host) feeds it lines and write completions and acts on what it
// returns. Tests drive it directly.
//
// Request states and what cancellation does in each (see docs/cancellation.md):
//
//   state      terminal / partial                        total
//   queued     removed; nothing reaches the study        same
//   writing    abandoned; op completes; `cancel` queued   ignored (the frame is on the wire)
//   written    abandoned; op completes; `cancel` queued   ignored
//   abandoned  nothing (the op already completed)         nothing
//
// `cancel` frames are only queued when the study advertised the `cancel` capability, and they
// go ahead of queued requests. A frame is never torn: cancellation never touches a write in
// progress. An abandoned request keeps counting as outstanding until its late response comes.
#pragma once

#include <mira/protocol/types.hpp>

#include <boost/asio/buffer.hpp>
#include <boost/asio/cancellation_type.hpp>
#include <boost/json/monotonic_resource.hpp>
#include <boost/json/parser.hpp>

#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace mira::detail {

struct envelope;

/// What the shell attaches to a request; the multiplexer owns it and hands it back.
struct pending_op {
  virtual ~pending_op() = default;
  /// The hot path of on_line(): the text of a response's result, before anything checked it.
  /// True when the op decoded it with a reader that checks the JSON as it reads
  /// (protocol::detail::read_run_result_text), so that the text was one valid JSON value and the
  /// response is routed as if the line had been checked first. False leaves the line to the
  /// checked path, as if this had not been asked.
  virtual bool decode_unchecked(std::string_view /*result_text*/) { return false; }
};

enum class request_state : std::uint8_t { queued, writing, written, abandoned };

enum class drop_reason : std::uint8_t {
  invalid_json,     // not JSON (or invalid UTF-8)
  not_object,       // JSON, but not an object
  bad_id,           // id is not a non-negative integer
  unknown_id,       // no request with this id (duplicate or never sent)
  late_response,    // answer to a request that was cancelled: expected, not an error
  cancel_ack,       // answer to one of our `cancel` frames
  reverse_request,  // a request from the study; this host implements none
  unknown_notification,
  unclassifiable,  // neither method nor id
};

std::string_view to_string(drop_reason r);

enum class inbound_kind : std::uint8_t { response, notification, dropped };

struct inbound {
  inbound_kind kind = inbound_kind::dropped;

  // kind::response: the op is handed back; exactly one of result / study_error / violation.
  // `result_text` is the result's JSON text (valid JSON: checked by the envelope classifier's
  // skim, or by the op's decoder on the hot path): every response is routed without a DOM, and
  // `result` stays unparsed until multiplexer::result_value() asks for it. The text is exactly as
  // sent, except for a line the skim left to Boost.JSON, whose canonical text it then is. Both are
  // only valid until the next on_line(): they live in the parser's arena and the line.
  std::int64_t id = 0;
  std::unique_ptr<pending_op> op;
  std::string_view result_text;
  bool result_parsed = false;
  boost::json::value result;
  std::optional<protocol::rpc_error> study_error;
  std::string violation;  // the response was malformed (both/neither result and error, ...)

  // kind::notification (event / log): correlated by params.request_id (0 = uncorrelated).
  // `params` is valid until the next on_line(), like `result`.
  std::string method;
  boost::json::value params;
  std::int64_t request_id = 0;
  pending_op* target = nullptr;  // the op that asked, when request_id names a live request

  // kind::dropped
  drop_reason reason = drop_reason::unclassifiable;
  bool first_of_kind = false;  // first drop of this reason (and method): log it at warning level
  std::string detail;
};

enum class cancel_kind : std::uint8_t { none, removed_unsent, abandoned, ignored };

struct cancel_outcome {
  cancel_kind kind = cancel_kind::none;
  std::unique_ptr<pending_op> op;  // complete it with operation_aborted
  bool cancel_frame_queued = false;
};

class multiplexer {
 public:
  explicit multiplexer(std::size_t max_batch_bytes = std::size_t{256} << 10);

  /// The study advertised `cancel`: abandoned requests get a `cancel` frame.
  void set_supports_cancel(bool v) { supports_cancel_ = v; }
  bool supports_cancel() const { return supports_cancel_; }

  /// Queues a request; `params_json` is the params' JSON text (empty: no params). On a closed
  /// connection the op is handed straight back.
  std::unique_ptr<pending_op> add_request(std::int64_t id, std::string_view method,
                                          std::string_view params_json,
                                          std::unique_ptr<pending_op> op);

  bool has_pending_writes() const;
  /// Moves queued frames (cancels first) into the write in progress and returns them as one
  /// contiguous buffer, valid until on_write_done(). One buffer, not one per frame: Asio 1.26
  /// passes at most 16 buffers to each writev, so a gathered batch of 64 frames took four
  /// system calls and woke the study four times.
  boost::asio::const_buffer prepare_write();
  void on_write_done();
  bool writing() const { return !writing_ids_.empty(); }

  /// Classifies and routes one inbound line. The JSON it hands out lives in an arena that the
  /// next call reuses: consume it (copy what must outlive it) before calling again. A line that
  /// is not valid JSON but begins `{"id":N` for a written request N is that request's response,
  /// with a violation (it fails instead of waiting forever).
  inbound on_line(std::string_view line);

  /// The result of a response as JSON, parsed now if it was routed as text. Valid until the
  /// next on_line(), like the response itself.
  const boost::json::value& result_value(inbound& in);

  /// A line too long to keep (or not valid JSON) began with `prefix`: when that prefix shows a
  /// response to a written request (`{"id": N, ...`), that request is handed back to be failed.
  std::unique_ptr<pending_op> take_oversized(std::string_view prefix, std::int64_t& id);

  /// Applies the cancellation rules above; `cancel_frame_id` is used if a frame is sent, and
  /// 0 sends none (the protocol defines `cancel` only for run, execute and score).
  cancel_outcome cancel(std::int64_t id, boost::asio::cancellation_type_t type,
                        std::int64_t cancel_frame_id);

  /// The connection is gone: hands back every op still waiting. Later requests bounce.
  std::vector<std::unique_ptr<pending_op>> close();
  bool closed() const { return closed_; }

  pending_op* find(std::int64_t id);
  std::optional<request_state> state(std::int64_t id) const;
  /// Requests the study is working on or may still answer (written or abandoned).
  std::size_t outstanding() const { return outstanding_; }
  /// Cancelled requests the study has not answered yet: still working, as far as we know.
  std::size_t abandoned() const { return abandoned_; }
  std::size_t size() const { return entries_.size(); }
  /// Requests waiting to be written (not cancelled).
  std::size_t queued() const { return live_queued_; }

 private:
  struct entry {
    request_state state = request_state::queued;
    bool is_cancel = false;
    std::unique_ptr<pending_op> op;
  };
  // Frames waiting to be written, oldest first, in one byte buffer: a frame is formatted once,
  // straight into it, with no allocation of its own.
  class frame_queue {
   public:
    struct ref {
      std::int64_t id;
      std::size_t offset;  // from the start of everything ever queued
      std::size_t size;
    };
    void push(std::int64_t id, std::string_view method, std::string_view params_json);
    bool empty() const { return refs_.empty(); }
    const ref& front() const { return refs_.front(); }
    std::string_view text(const ref& r) const {
      return {bytes_.data() + (r.offset - base_), r.size};
    }
    void pop_front();
    void clear();

   private:
    std::string bytes_;
    std::size_t base_ = 0;  // offset of bytes_[0]
    std::deque<ref> refs_;
  };

  void set_state(entry& e, request_state s);
  void erase(std::unordered_map<std::int64_t, entry>::iterator it);
  inbound drop(drop_reason r, std::string detail, std::string_view method = {});
  std::optional<inbound> route_unchecked(const envelope& env);
  inbound on_notification(const envelope& env);
  boost::json::value parse_span(std::string_view text);
  void reset_arena();

  std::unordered_map<std::int64_t, entry> entries_;
  frame_queue urgent_;  // cancel frames
  frame_queue queue_;
  std::string wire_;  // the write in progress
  std::vector<std::int64_t> writing_ids_;
  std::size_t max_batch_;
  std::size_t outstanding_ = 0;
  std::size_t abandoned_ = 0;
  std::size_t live_queued_ = 0;  // queued request frames not cancelled
  bool supports_cancel_ = false;
  bool closed_ = false;
  unsigned char arena_buffer_[16 << 10];  // typical lines parse inside it, without malloc
  std::optional<boost::json::monotonic_resource> arena_;
  boost::json::parser parser_;
  std::string canonical_;  // a line Boost.JSON had to read, re-written for the classifier
  std::set<std::string, std::less<>> logged_;  // reasons/methods already reported once
};

}  // namespace mira::detail
