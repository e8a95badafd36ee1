// Store facade: opens the database, then routes writes to the Writer and reads to the Reader.
#include "daemon/store/store.hpp"

#include "daemon/store/reader.hpp"
#include "daemon/store/writer.hpp"

namespace fo::store {

std::unique_ptr<Store> Store::open(const std::string& path, size_t queue_limit) {
  db::DbPtr conn = db::open_writer(path);
  // The reader opens after the migrations so it sees the final schema; the writer thread starts
  // last so a failure above leaves no thread behind.
  auto reader = std::make_unique<Reader>(path);
  auto writer = std::make_unique<Writer>(std::move(conn), queue_limit);
  return std::unique_ptr<Store>(new Store(std::move(writer), std::move(reader)));
}

Store::Store(std::unique_ptr<Writer> writer, std::unique_ptr<Reader> reader)
    : writer_(std::move(writer)), reader_(std::move(reader)) {}

Store::~Store() = default;

void Store::record_transition(TransitionRecord r) {
  writer_->enqueue(std::move(r));
}
void Store::record_round(RoundRecord r) {
  writer_->enqueue(std::move(r));
}
void Store::record_action(ActionRecord r) {
  writer_->enqueue(std::move(r));
}
void Store::record_command(CommandRecord r) {
  writer_->enqueue(std::move(r));
}

void Store::save_group_state(const std::string& group, std::string blob, int64_t ts_ms) {
  writer_->enqueue(StateSave{group, std::move(blob), ts_ms});
}

bool Store::flush(std::chrono::milliseconds timeout) {
  return writer_->flush(timeout);
}
StoreStats Store::stats() const {
  return writer_->stats();
}

std::map<std::string, std::string> Store::load_group_states() {
  return reader_->load_group_states();
}

std::vector<TransitionRecord> Store::transitions(const std::string& group, int64_t since_ms,
                                                 int64_t until_ms, size_t limit) {
  return reader_->transitions(group, since_ms, until_ms, limit);
}

std::vector<ActionRecord> Store::actions(const std::string& group, int64_t since_ms,
                                         int64_t until_ms, size_t limit) {
  return reader_->actions(group, since_ms, until_ms, limit);
}

std::vector<CommandRecord> Store::commands(const std::string& group, int64_t since_ms,
                                           int64_t until_ms, size_t limit) {
  return reader_->commands(group, since_ms, until_ms, limit);
}

std::vector<RoundRecord> Store::rounds(const std::string& group, int64_t since_ms, int64_t until_ms,
                                       size_t limit) {
  return reader_->rounds(group, since_ms, until_ms, limit);
}

std::vector<GapRecord> Store::gaps(const std::string& group, int64_t since_ms, int64_t until_ms,
                                   size_t limit) {
  return reader_->gaps(group, since_ms, until_ms, limit);
}

std::vector<ActionRecord> Store::plan_steps(const std::string& group, uint64_t plan_id) {
  return reader_->plan_steps(group, plan_id);
}

}  // namespace fo::store
