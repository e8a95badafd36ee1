// Writes a synthetic timeline for the simulation benchmark: one group probed from six locations
// every 10 s, mostly healthy, with random one-round blips, partial degradations (warm, no
// failover) and a few full primary outages (failover and failback). Deterministic per seed.
//   sim_timeline_gen --days N --out FILE [--sites both|primary] [--seed S]
#include <charconv>
#include <cstdio>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

namespace {

struct FileCloser {
  void operator()(std::FILE* f) const { std::fclose(f); }
};

int usage() {
  std::fprintf(stderr,
               "usage: sim_timeline_gen --days N --out FILE [--sites both|primary] [--seed S]\n");
  return 2;
}

constexpr int64_t kRound = 10;  // seconds
constexpr int64_t kDay = 86400 / kRound;
const char* const kLocations[] = {"ams", "fra", "lon", "nyc", "sfo", "sin"};

// Something going on at a site: from round `until` on it is over.
struct Trouble {
  int64_t until = -1;
  double fail_p = 0;  // chance a location sees the site failing in a round
  int bad_locations = 0;
};

// Starts a new trouble with probability `per_round`, lasting [min_rounds, max_rounds].
void maybe_start(Trouble& t, int64_t k, std::mt19937_64& rng, double per_round, int min_rounds,
                 int max_rounds, double fail_p, int bad_locations) {
  if (t.until > k) return;
  if (std::uniform_real_distribution<double>(0, 1)(rng) >= per_round) return;
  t.until = k + std::uniform_int_distribution<int>(min_rounds, max_rounds)(rng);
  t.fail_p = fail_p;
  t.bad_locations = bad_locations;
}

}  // namespace

int main(int argc, char** argv) {
  int days = 0;
  std::string out_path, sites = "both";
  uint64_t seed = 4;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--days" && i + 1 < argc)
      days = std::atoi(argv[++i]);
    else if (a == "--out" && i + 1 < argc)
      out_path = argv[++i];
    else if (a == "--sites" && i + 1 < argc)
      sites = argv[++i];
    else if (a == "--seed" && i + 1 < argc)
      seed = std::strtoull(argv[++i], nullptr, 10);
    else
      return usage();
  }
  if (days < 1 || days > 3650 || out_path.empty() || (sites != "both" && sites != "primary"))
    return usage();
  std::vector<char> iobuf(1 << 20);  // declared first: it must outlive the FILE using it
  std::unique_ptr<std::FILE, FileCloser> f(std::fopen(out_path.c_str(), "w"));
  if (!f) {
    std::perror(out_path.c_str());
    return 1;
  }
  std::setvbuf(f.get(), iobuf.data(), _IOFBF, iobuf.size());
  std::fputs("t,group,site,location,ok,latency_ms\n", f.get());

  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> unit(0, 1);
  Trouble outage, degraded, secondary_outage;
  const int n_sites = sites == "both" ? 2 : 1;
  const int64_t rounds = int64_t(days) * kDay;
  size_t rows = 0;
  char line[128];
  for (int64_t k = 0; k < rounds; ++k) {
    // Full outage about every 4 days (5..60 min, 90 % of results failing); partial degradation
    // about twice a day (2..20 min, two locations failing); secondary outage about every 15 days.
    maybe_start(outage, k, rng, 1.0 / (4 * kDay), 30, 360, 0.9, 6);
    maybe_start(degraded, k, rng, 1.0 / (kDay / 2), 12, 120, 1.0, 2);
    maybe_start(secondary_outage, k, rng, 1.0 / (15 * kDay), 30, 120, 1.0, 6);
    for (int site = 0; site < n_sites; ++site) {
      const Trouble* troubles[2] = {site == 0 ? &outage : &secondary_outage,
                                    site == 0 ? &degraded : nullptr};
      for (int loc = 0; loc < 6; ++loc) {
        bool ok = unit(rng) >= 1.0 / 3000;  // a lost probe now and then
        for (const Trouble* t : troubles)
          if (t && t->until > k && loc < t->bad_locations && unit(rng) < t->fail_p) ok = false;
        const int latency = ok ? 30 + int(rng() % 170) : 5000;
        char* p = line;
        char* end = line + sizeof line;
        p = std::to_chars(p, end, k * kRound).ptr;
        const char* mid = site == 0 ? ",shop,primary," : ",shop,secondary,";
        const size_t mid_len = std::strlen(mid);
        std::memcpy(p, mid, mid_len);
        p += mid_len;
        std::memcpy(p, kLocations[loc], 3);
        p += 3;
        *p++ = ',';
        *p++ = ok ? '1' : '0';
        *p++ = ',';
        p = std::to_chars(p, end, latency).ptr;
        *p++ = '\n';
        std::fwrite(line, 1, size_t(p - line), f.get());
        ++rows;
      }
    }
  }
  if (std::fflush(f.get()) != 0) {
    std::perror(out_path.c_str());
    return 1;
  }
  std::fprintf(stderr, "sim_timeline_gen: %d days, %s, %zu rows -> %s\n", days, sites.c_str(), rows,
               out_path.c_str());
  return 0;
}
