// A typical RunResult (two scores, usage, timing, a tool call, metadata): the payload the codec
// benchmark decodes and `echo_study --typical` answers with.
#pragma once

#include <string_view>

namespace bench {

constexpr std::string_view typical_run_result =
    R"({"eval":"bench","sample":"s","target":"sim","input":["What is the answer?"],)"
    R"("expected":"42","passed":true,"aggregate":1.0,"scores":[{"scorer":"contains",)"
    R"("value":1.0,"pass":true,"reason":"found \"42\""},{"scorer":"length","value":1.0,)"
    R"("pass":true,"reason":"short enough"}],"transcript":{"final_response":)"
    R"("Hi! The answer is 42. I looked it up and double-checked the arithmetic.",)"
    R"("iterations":2,"tool_calls_count":1,"tool_calls":["calculator"],"usage":)"
    R"({"input_tokens":120,"output_tokens":48,"cache_read_tokens":64,"reasoning_tokens":12,)"
    R"("cost_usd":0.00042},"timing":{"duration_ms":420,"time_to_first_token_ms":180},)"
    R"("metadata":{"trace":"https://example.invalid/t/1"}},"skipped":false})";

}  // namespace bench
