#include "agent/core/invitation_book.h"

#include <algorithm>

namespace shoal::core {

Status InvitationBook::load(const std::vector<store::InvitationRecord>& records,
                            const crypto::SignatureScheme& signatures) {
  for (const auto& record : records) {
    auto invitation = crypto::open_token(record.token, signatures);
    if (!invitation.is_ok()) {
      return invitation.status().with_context("stored invitation " + record.id);
    }
    insert({std::move(invitation).value(), record});
  }
  return Status::ok();
}

void InvitationBook::insert(Owned owned) {
  bool issued = owned.record.direction == store::InvitationDirection::kIssued;
  auto& table = issued ? issued_ : accepted_;
  auto& index = issued ? issued_by_peer_ : accepted_by_peer_;
  std::string peer = owned.record.peer_id;
  auto [row, made] = table.insert_or_assign(owned.record.id, std::move(owned));
  if (!made) return;
  auto [entry, first] = index.try_emplace(peer);
  entry->second.push_back(&row->second);
  if (first) ++index_generation_;
}

const InvitationBook::Owned* InvitationBook::find_issued(const std::string& id) const {
  auto it = issued_.find(id);
  return it == issued_.end() ? nullptr : &it->second;
}

const InvitationBook::Owned* InvitationBook::find_accepted(const std::string& id) const {
  auto it = accepted_.find(id);
  return it == accepted_.end() ? nullptr : &it->second;
}

Result<std::vector<std::string>> InvitationBook::add(Owned owned, store::Store& store) {
  bool issued = owned.record.direction == store::InvitationDirection::kIssued;
  auto& table = issued ? issued_ : accepted_;
  auto& index = issued ? issued_by_peer_ : accepted_by_peer_;
  SHOAL_RETURN_IF_ERROR(store.put_invitation(owned.record));
  std::vector<std::string> replaced;
  if (auto rows = index.find(owned.record.peer_id); rows != index.end()) {
    for (const Owned* row : rows->second) {
      Owned& older = table.at(row->record.id);  // the same row, writable
      if (older.record.id == owned.record.id || older.record.replaced || older.record.revoked)
        continue;
      // An older token accepted late does not replace a newer one.
      if (!issued && older.invitation.created > owned.invitation.created) continue;
      older.record.replaced = true;
      SHOAL_RETURN_IF_ERROR(store.put_invitation(older.record));
      replaced.push_back(older.record.id);
    }
  }
  insert(std::move(owned));
  return replaced;
}

Result<bool> InvitationBook::revoke(store::InvitationDirection direction, const std::string& id,
                                    store::Store& store) {
  auto& table = direction == store::InvitationDirection::kIssued ? issued_ : accepted_;
  auto it = table.find(id);
  if (it == table.end()) return not_found("invitation " + id);
  if (it->second.record.revoked) return false;
  it->second.record.revoked = true;
  SHOAL_RETURN_IF_ERROR(store.put_invitation(it->second.record));
  return true;
}

InvitationState InvitationBook::state(const Owned& owned, TimePoint now) {
  if (owned.record.revoked) return InvitationState::kRevoked;
  if (owned.record.replaced) return InvitationState::kReplaced;
  if (owned.invitation.expires && *owned.invitation.expires <= now)
    return InvitationState::kExpired;
  if (now < owned.invitation.not_before) return InvitationState::kNotYetValid;
  return InvitationState::kActive;
}

std::vector<const crypto::Invitation*> InvitationBook::valid(const Index& index,
                                                             const std::string& peer,
                                                             TimePoint now) {
  auto rows = index.find(peer);
  if (rows == index.end()) return {};
  return valid(rows->second, now);
}

std::vector<const crypto::Invitation*> InvitationBook::valid(const std::vector<const Owned*>& rows,
                                                             TimePoint now) {
  std::vector<const crypto::Invitation*> out;
  valid(rows, now, out);
  return out;
}

void InvitationBook::valid(const std::vector<const Owned*>& rows, TimePoint now,
                           std::vector<const crypto::Invitation*>& out) {
  out.clear();
  for (const Owned* owned : rows) {
    if (state(*owned, now) == InvitationState::kActive) out.push_back(&owned->invitation);
  }
}

bool InvitationBook::any_valid(const Index& index, const std::string& peer, TimePoint now) {
  auto rows = index.find(peer);
  return rows != index.end() && any_valid(&rows->second, now);
}

bool InvitationBook::any_valid(const std::vector<const Owned*>* rows, TimePoint now) {
  return rows != nullptr && std::any_of(rows->begin(), rows->end(), [&](const Owned* owned) {
           return state(*owned, now) == InvitationState::kActive;
         });
}

InvitationBook::OnRecord InvitationBook::on_record(const std::string& peer) const {
  OnRecord out;
  if (auto rows = issued_by_peer_.find(peer); rows != issued_by_peer_.end()) {
    out.issued = &rows->second;
  }
  if (auto rows = accepted_by_peer_.find(peer); rows != accepted_by_peer_.end()) {
    out.accepted = &rows->second;
  }
  return out;
}

std::vector<const InvitationBook::Owned*> InvitationBook::all_with(const Index& index,
                                                                   const std::string& peer) {
  auto rows = index.find(peer);
  return rows == index.end() ? std::vector<const Owned*>{} : rows->second;
}

std::vector<const crypto::Invitation*> InvitationBook::valid_issued(const std::string& peer,
                                                                    TimePoint now) const {
  return valid(issued_by_peer_, peer, now);
}

std::vector<const crypto::Invitation*> InvitationBook::valid_accepted(const std::string& peer,
                                                                      TimePoint now) const {
  return valid(accepted_by_peer_, peer, now);
}

bool InvitationBook::is_source(const std::string& peer, TimePoint now) const {
  return any_valid(issued_by_peer_, peer, now);
}

bool InvitationBook::is_target(const std::string& peer, TimePoint now) const {
  return any_valid(accepted_by_peer_, peer, now);
}

std::vector<const InvitationBook::Owned*> InvitationBook::issued_to(const std::string& peer) const {
  return all_with(issued_by_peer_, peer);
}

std::vector<const InvitationBook::Owned*> InvitationBook::accepted_from(
    const std::string& peer) const {
  return all_with(accepted_by_peer_, peer);
}

std::vector<std::string> InvitationBook::revocations_to_tell(const std::string& peer,
                                                             TimePoint now) const {
  auto rows = issued_by_peer_.find(peer);
  return revocations_to_tell(rows == issued_by_peer_.end() ? nullptr : &rows->second, now);
}

std::vector<std::string> InvitationBook::revocations_to_tell(
    const std::vector<const Owned*>* issued, TimePoint now) {
  std::vector<std::string> out;
  if (issued == nullptr) return out;
  for (const Owned* owned : *issued) {
    if (owned->record.revoked && (!owned->invitation.expires || now < *owned->invitation.expires)) {
      out.push_back(owned->record.id);
    }
  }
  return out;
}

std::string InvitationBook::broken_invariant() const {
  auto indexed = [](const std::map<std::string, Owned>& table, const Index& index) {
    size_t count = 0;
    for (const auto& [peer, rows] : index) {
      for (const Owned* row : rows) {
        auto it = table.find(row->record.id);
        if (it == table.end() || &it->second != row || row->record.peer_id != peer) return false;
        ++count;
      }
    }
    return count == table.size();
  };
  if (!indexed(issued_, issued_by_peer_) || !indexed(accepted_, accepted_by_peer_)) {
    return "an invitation index differs from its table";
  }
  for (const auto& [peer, rows] : issued_by_peer_) {
    auto current = std::count_if(rows.begin(), rows.end(), [](const Owned* row) {
      return !row->record.replaced && !row->record.revoked;
    });
    if (current > 1) return "a source holds two current invitations";
  }
  return "";
}

}  // namespace shoal::core
