// Rule 3: topology spread by repeated selectOne (seed 001). Clusters that
// share every topology value form a group and share their spread score, so a
// step costs O(groups x terms + domains), not O(clusters x terms).
#include <algorithm>
#include <cmath>
#include <map>
#include <unordered_map>
#include <string>
#include <vector>

#include "agent/placement/engine.h"

namespace shoal::placement {
namespace {

using model::ClusterCandidate;

constexpr int kBitsPerTerm = 6;
constexpr double kMaxTermScore = 63;

struct Domain {
  int parent = -1;     // domain id at the previous term, -1 for the first term
  size_t term = 0;
  int64_t selected = 0;
};

struct Group {
  std::vector<int> domains;       // one domain id per term
  std::vector<size_t> members;    // indexes into eligible, best first
  size_t next = 0;                // first member not yet selected
  std::string label;              // "us-east/us-east-1a", for explanations
};

}  // namespace

void select_spread(const model::PlacementSpec& policy,
                   const std::vector<const ClusterCandidate*>& selectable,
                   const std::vector<const ClusterCandidate*>& placed,
                   const std::vector<double>& selectable_scores, double spread_weight,
                   const PlaceOptions& options, PlacementOutcome* out) {
  // Clusters where other copies already are take part as members selected
  // before the first step: they count in their domains and are never picked.
  std::vector<const ClusterCandidate*> eligible = selectable;
  eligible.insert(eligible.end(), placed.begin(), placed.end());
  std::vector<double> prioritizer_scores = selectable_scores;
  prioritizer_scores.resize(eligible.size(), 0);
  auto is_placed = [&](size_t index) { return index >= selectable.size(); };
  const auto& terms = policy.spread_constraints;
  const size_t term_count = terms.size();

  // Domains: one per distinct tuple prefix (v0..vi) at each term i, interned
  // through a hash of (parent id, value).
  std::vector<Domain> domains;
  std::unordered_map<std::string, int> domain_by_key;
  std::vector<int> group_of_leaf;  // by domain id at the last term
  std::vector<Group> groups;
  Group everything;                // with no terms, one group holds every cluster
  std::string key;
  for (size_t index = 0; index < eligible.size(); ++index) {
    std::vector<int> tuple;
    std::string label;
    int parent = -1;
    for (size_t t = 0; t < term_count; ++t) {
      const auto& source = terms[t].key_is_claim ? eligible[index]->claims : eligible[index]->labels;
      auto value_it = source.find(terms[t].topology_key);
      const std::string empty;
      const std::string& value = value_it == source.end() ? empty : value_it->second;
      key.assign(std::to_string(parent)).push_back('\0');
      key.append(value);
      auto [found, inserted] = domain_by_key.emplace(key, static_cast<int>(domains.size()));
      if (inserted) {
        domains.push_back({parent, t, 0});
        group_of_leaf.push_back(-1);
      }
      tuple.push_back(found->second);
      if (options.explain) label += (t ? "/" : "") + value;
      parent = found->second;
    }
    if (term_count == 0) {
      everything.members.push_back(index);
      continue;
    }
    int& group = group_of_leaf[static_cast<size_t>(parent)];
    if (group < 0) {
      group = static_cast<int>(groups.size());
      groups.push_back({tuple, {}, 0, label});
    }
    groups[static_cast<size_t>(group)].members.push_back(index);
  }
  if (term_count == 0 && !everything.members.empty()) groups.push_back(std::move(everything));
  for (auto& group : groups) {
    std::sort(group.members.begin(), group.members.end(), [&](size_t a, size_t b) {
      if (is_placed(a) != is_placed(b)) return is_placed(a);
      if (prioritizer_scores[a] != prioritizer_scores[b]) return prioritizer_scores[a] > prioritizer_scores[b];
      return eligible[a]->name < eligible[b]->name;
    });
    while (group.next < group.members.size() && is_placed(group.members[group.next])) {
      ++group.next;
      for (int d : group.domains) ++domains[static_cast<size_t>(d)].selected;
    }
  }

  const size_t wanted = static_cast<size_t>(policy.number_of_clusters);
  std::vector<double> term_score(domains.size());
  std::vector<char> domain_excluded(domains.size());
  std::vector<std::string> exclusion_reason(domains.size());
  std::vector<size_t> live;
  std::vector<double> packed;
  std::vector<int64_t> parent_lo(domains.size() + 1), parent_hi(domains.size() + 1);
  while (out->decisions.size() < wanted) {
    // Per domain: its term score (63 least selected .. 0 most) and whether
    // selecting in it would break a DoNotSchedule maxSkew.
    // Sibling range per parent (slot 0 is the root of the first term), one pass.
    std::fill(parent_lo.begin(), parent_lo.end(), INT64_MAX);
    std::fill(parent_hi.begin(), parent_hi.end(), INT64_MIN);
    for (const Domain& domain : domains) {
      size_t slot = static_cast<size_t>(domain.parent + 1);
      parent_lo[slot] = std::min(parent_lo[slot], domain.selected);
      parent_hi[slot] = std::max(parent_hi[slot], domain.selected);
    }
    for (size_t d = 0; d < domains.size(); ++d) {
      int64_t lo = parent_lo[static_cast<size_t>(domains[d].parent + 1)];
      int64_t hi = parent_hi[static_cast<size_t>(domains[d].parent + 1)];
      int64_t count = domains[d].selected;
      term_score[d] = hi == lo ? 0 : std::round(kMaxTermScore * static_cast<double>(hi - count) /
                                                static_cast<double>(hi - lo));
      const auto& constraint = terms[domains[d].term];
      domain_excluded[d] = constraint.when_unsatisfiable == model::WhenUnsatisfiable::kDoNotSchedule &&
                           count + 1 - lo > constraint.max_skew;
      if (domain_excluded[d] && options.explain) {
        exclusion_reason[d] = constraint.topology_key + " maxSkew " +
                              std::to_string(constraint.max_skew) + " would be exceeded (skew " +
                              std::to_string(count + 1 - lo) + ")";
      }
    }
    Step step;
    live.clear();
    packed.clear();
    for (size_t g = 0; g < groups.size(); ++g) {
      Group& group = groups[g];
      if (group.next >= group.members.size()) continue;
      const std::string* reason = nullptr;
      double score = 0;
      for (size_t t = 0; t < term_count; ++t) {
        int d = group.domains[t];
        if (domain_excluded[static_cast<size_t>(d)] && !reason) reason = &exclusion_reason[static_cast<size_t>(d)];
        score = score * (1 << kBitsPerTerm) + term_score[static_cast<size_t>(d)];
      }
      if (reason) {
        if (options.explain) {
          for (size_t m = group.next; m < group.members.size(); ++m) {
            step.excluded.push_back({eligible[group.members[m]]->name, *reason});
          }
        }
        continue;
      }
      live.push_back(g);
      packed.push_back(score);
    }
    if (live.empty()) {
      if (selectable.empty()) out->reason = "no cluster passed the predicates";
      else if (selectable.size() == out->decisions.size()) out->reason = "every eligible cluster is selected";
      else out->reason = "no further cluster can be selected without exceeding a DoNotSchedule maxSkew";
      if (options.explain && !step.excluded.empty()) out->steps.push_back(std::move(step));
      return;
    }
    double lo = *std::min_element(packed.begin(), packed.end());
    double hi = *std::max_element(packed.begin(), packed.end());
    size_t best_group = 0;
    double best_final = 0;
    const std::string* best_name = nullptr;
    for (size_t i = 0; i < live.size(); ++i) {
      Group& group = groups[live[i]];
      double spread = hi > lo ? -100 + 200 * (packed[i] - lo) / (hi - lo) : 0;
      size_t first = group.members[group.next];
      double final_score = spread_weight * spread + prioritizer_scores[first];
      const std::string& name = eligible[first]->name;
      if (!best_name || final_score > best_final + 1e-9 ||
          (std::abs(final_score - best_final) <= 1e-9 && name < *best_name)) {
        best_group = live[i];
        best_final = final_score;
        best_name = &name;
      }
      if (options.explain) {
        for (size_t m = group.next; m < group.members.size(); ++m) {
          size_t member = group.members[m];
          step.candidates.push_back({eligible[member]->name, spread, prioritizer_scores[member],
                                     spread_weight * spread + prioritizer_scores[member]});
        }
      }
    }
    Group& chosen = groups[best_group];
    out->decisions.push_back(*best_name);
    ++chosen.next;
    for (int d : chosen.domains) ++domains[static_cast<size_t>(d)].selected;
    if (options.explain) {
      step.pick = out->decisions.back();
      std::sort(step.candidates.begin(), step.candidates.end(),
                [](const StepCandidate& a, const StepCandidate& b) { return a.cluster < b.cluster; });
      std::sort(step.excluded.begin(), step.excluded.end(),
                [](const FilteredCluster& a, const FilteredCluster& b) { return a.cluster < b.cluster; });
      out->steps.push_back(std::move(step));
    }
  }
}

}  // namespace shoal::placement
