// The study's evals and what `initialize` says of the study (see registry.hpp).
#include <mira/study/registry.hpp>

#include <mira/study/dataset.hpp>

#include <algorithm>
#include <set>
#include <stdexcept>

namespace mira::study {

eval& eval::description(std::string text) {
  info_.description = std::move(text);
  return *this;
}

eval& eval::add_sample(study::sample s) {
  generator_.reset();
  sample_index_.try_emplace(s.id, samples_.size());
  samples_.push_back(std::move(s));
  return *this;
}

eval& eval::samples(std::vector<study::sample> list) {
  generator_.reset();
  samples_.clear();
  sample_index_.clear();
  samples_.reserve(list.size());
  for (auto& s : list) add_sample(std::move(s));
  return *this;
}

eval& eval::samples(sample_generator generator) {
  samples_.clear();
  sample_index_.clear();
  generator_ = std::move(generator);
  return *this;
}

eval& eval::dataset(const study::dataset& d) {
  return samples(d.generator());
}

eval& eval::add_target(protocol::target_info target) {
  info_.targets.push_back(std::move(target));
  return *this;
}

eval& eval::add_target(std::string label, std::string provider) {
  protocol::target_info t;
  t.label = std::move(label);
  t.provider = std::move(provider);
  return add_target(std::move(t));
}

eval& eval::axis(std::string name, std::vector<std::string> values) {
  info_.axes.push_back({std::move(name), std::move(values)});
  return *this;
}

eval& eval::trials(std::int64_t n) {
  info_.trials = n < 1 ? 1 : n;
  return *this;
}

eval& eval::seed(std::int64_t base) {
  info_.seed = base;
  return *this;
}

eval& eval::max_turns(std::int64_t n) {
  info_.max_turns = n;
  return *this;
}

eval& eval::metadata(json::object m) {
  info_.metadata = std::move(m);
  return *this;
}

eval& eval::score_with(study::scorer s) {
  info_.scorers.push_back(s.name());
  scorers_.push_back(std::move(s));
  return *this;
}

eval& eval::subject(study::subject s) {
  subject_ = std::move(s);
  return *this;
}

std::size_t eval::sample_count() const noexcept {
  return generator_ ? generator_->count : samples_.size();
}

study::sample eval::sample_at(std::size_t index) const {
  if (index >= sample_count())
    throw std::out_of_range("eval " + name_ + " has " + std::to_string(sample_count()) +
                            " samples, not " + std::to_string(index + 1));
  return generator_ ? generator_->make(index) : samples_[index];
}

const study::sample* eval::listed_sample(std::string_view id) const {
  auto it = sample_index_.find(id);
  return it == sample_index_.end() ? nullptr : &samples_[it->second];
}

std::optional<study::sample> eval::find_sample(std::string_view id) const {
  if (auto* s = listed_sample(id)) return *s;
  if (!generator_) return std::nullopt;
  auto index = generator_->index_of(id);
  if (!index || *index >= generator_->count) return std::nullopt;
  return generator_->make(*index);
}

const protocol::target_info* eval::find_target(std::string_view label) const {
  for (auto& t : info_.targets)
    if (t.label == label) return &t;
  return nullptr;
}

registry::registry(std::string study_name, std::string study_version)
    : name_(std::move(study_name)), version_(std::move(study_version)) {}

eval& registry::add(std::string name) {
  return evals_.emplace_back(std::move(name));
}

registry& registry::default_target(protocol::target_info target) {
  default_targets_.push_back(std::move(target));
  return *this;
}

registry& registry::emits_events(std::vector<std::string> kinds) {
  event_kinds_ = std::move(kinds);
  return *this;
}

registry& registry::emits_trajectories() {
  trajectories_ = true;
  return *this;
}

registry& registry::capability_param(std::string token, json::value params) {
  capability_params_[token] = std::move(params);
  return *this;
}

const eval* registry::find(std::string_view name) const {
  // Linear: a study has a handful of evals, and a map would need rebuilding as they are added.
  for (auto& e : evals_)
    if (e.name() == name) return &e;
  return nullptr;
}

const std::vector<protocol::target_info>& registry::targets_of(const eval& e) const noexcept {
  return e.info().targets.empty() ? default_targets_ : e.info().targets;
}

protocol::initialize_result registry::describe(std::size_t page_size, bool cancel,
                                               bool case_events) const {
  protocol::initialize_result r;
  r.protocol_version = std::string(protocol::protocol_version);
  r.study = name_;
  r.evals = static_cast<std::int64_t>(evals_.size());
  r.study_version = version_;
  r.capabilities = {"usage", "execute", "score", "trials"};
  auto any = [&](auto pred) { return std::any_of(evals_.begin(), evals_.end(), pred); };
  if (any([](const eval& e) { return !e.info().axes.empty(); })) r.capabilities.push_back("axes");
  if (any([&](const eval& e) { return e.sample_count() > page_size; }))
    r.capabilities.push_back("paginate");
  if (cancel) r.capabilities.push_back("cancel");
  r.capability_params = capability_params_;
  auto kinds = event_kinds_;
  if (case_events) {
    if (std::find(kinds.begin(), kinds.end(), "started") == kinds.end())
      kinds.insert(kinds.begin(), "started");
    if (std::find(kinds.begin(), kinds.end(), "finished") == kinds.end())
      kinds.push_back("finished");
  }
  if (!kinds.empty()) {
    r.capabilities.push_back("events");
    r.capability_params["events"] =
        json::object{{"kinds", json::array(kinds.begin(), kinds.end())}};
  }
  if (trajectories_) {
    r.capabilities.push_back("trajectory");
    r.capability_params["trajectory"] = json::object{{"format", "ATIF"}, {"version", "1.7"}};
  }
  return r;
}

std::string registry::check() const {
  std::set<std::string_view> evals;
  for (auto& e : evals_) {
    auto where = "eval '" + e.name() + "'";
    if (e.name().empty()) return "an eval has no name";
    if (!evals.insert(e.name()).second) return "two evals are named '" + e.name() + "'";
    if (!e.run_subject()) return where + " has no subject";
    if (targets_of(e).empty())
      return where + " has no target (add one to it, or a default target to the study)";
    std::set<std::string_view> names;
    for (auto& t : targets_of(e))
      if (!names.insert(t.label).second)
        return where + " has two targets labelled '" + t.label + "'";
    names.clear();
    for (auto& a : e.info().axes) {
      if (a.name == "target") return where + " has an axis named 'target', which keys collide with";
      if (!names.insert(a.name).second) return where + " has two axes named '" + a.name + "'";
      if (a.values.empty()) return where + ": axis '" + a.name + "' has no values";
    }
    if (!e.generator_ && e.sample_index_.size() != e.samples_.size())
      for (std::size_t i = 0; i < e.samples_.size(); ++i)
        if (e.sample_index_.at(e.samples_[i].id) != i)
          return where + " has two samples with id '" + e.samples_[i].id + "'";
  }
  return {};
}

}  // namespace mira::study
