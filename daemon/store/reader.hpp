// Read side of the store: synchronous queries on a read-only connection (WAL lets them run
// while the writer commits). Serialized by a mutex; failures throw StoreError.
#pragma once

#include <mutex>
#include <string>

#include "daemon/store/db.hpp"
#include "daemon/store/store.hpp"

namespace fo::store {

class Reader {
 public:
  explicit Reader(const std::string& path);

  std::map<std::string, std::string> load_group_states();
  std::vector<TransitionRecord> transitions(const std::string& group, int64_t since_ms,
                                            int64_t until_ms, size_t limit);
  std::vector<ActionRecord> actions(const std::string& group, int64_t since_ms, int64_t until_ms,
                                    size_t limit);
  std::vector<CommandRecord> commands(const std::string& group, int64_t since_ms, int64_t until_ms,
                                      size_t limit);
  std::vector<RoundRecord> rounds(const std::string& group, int64_t since_ms, int64_t until_ms,
                                  size_t limit);
  std::vector<GapRecord> gaps(const std::string& group, int64_t since_ms, int64_t until_ms,
                              size_t limit);
  std::vector<ActionRecord> plan_steps(const std::string& group, uint64_t plan_id);

 private:
  std::mutex mu_;
  db::DbPtr db_;
};

}  // namespace fo::store
