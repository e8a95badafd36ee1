// Stand-in for systemd's manager on a private dbus-daemon (these machines run no systemd): owns
// org.freedesktop.systemd1 and speaks the part of its interface the systemd step uses
// (Subscribe, GetUnit, LoadUnit, Start/Stop/RestartUnit, JobRemoved, Unit.LoadState and
// Unit.ActiveState). Knobs make a unit's jobs fail, take time or be refused.
//
//   fake_manager --address unix:path=/tmp/x/bus [--unit NAME=STATE]... [--fail NAME=RESULT]...
//                [--delay NAME=MS]... [--deny NAME]...
//
// Prints "READY" once it owns the name and "JOB <verb> <unit> <id> <result>" per job finished.
#include <signal.h>
#include <systemd/sd-bus.h>
#include <systemd/sd-event.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <string>

namespace {

constexpr const char* kUnitPrefix = "/org/freedesktop/systemd1/unit";

struct Unit {
  std::string name;
  std::string path;
  std::string load_state = "loaded";
  std::string active_state = "inactive";
  std::string fail_result;  // job result instead of "done"
  uint64_t delay_ms = 0;    // job duration
  bool deny = false;        // jobs refused with AccessDenied
};

struct Job {
  uint32_t id = 0;
  std::string path;
  std::string verb;
  Unit* unit = nullptr;
};

std::map<std::string, std::unique_ptr<Unit>> g_units;  // by name
sd_bus* g_bus = nullptr;
sd_event* g_event = nullptr;
uint32_t g_next_job = 0;

Unit& unit_named(const std::string& name) {
  auto& slot = g_units[name];
  if (!slot) {
    slot = std::make_unique<Unit>();
    slot->name = name;
    char* path = nullptr;
    if (sd_bus_path_encode(kUnitPrefix, name.c_str(), &path) >= 0) {
      slot->path = path;
      free(path);
    }
  }
  return *slot;
}

Unit* unit_at(const char* path) {
  for (auto& [name, u] : g_units)
    if (u->path == path) return u.get();
  return nullptr;
}

int no_such_unit(sd_bus_error* error, const char* name) {
  return sd_bus_error_setf(error, "org.freedesktop.systemd1.NoSuchUnit", "Unit %s not found.",
                           name);
}

int method_subscribe(sd_bus_message* m, void*, sd_bus_error*) {
  return sd_bus_reply_method_return(m, "");
}

int method_get_unit(sd_bus_message* m, void*, sd_bus_error* error) {
  const char* name = nullptr;
  int r = sd_bus_message_read(m, "s", &name);
  if (r < 0) return r;
  auto it = g_units.find(name);
  if (it == g_units.end() || it->second->load_state == "not-found")
    return no_such_unit(error, name);
  return sd_bus_reply_method_return(m, "o", it->second->path.c_str());
}

// Like systemd: loading an unknown name yields a unit object whose LoadState is "not-found".
int method_load_unit(sd_bus_message* m, void*, sd_bus_error*) {
  const char* name = nullptr;
  int r = sd_bus_message_read(m, "s", &name);
  if (r < 0) return r;
  const bool known = g_units.count(name) > 0;
  Unit& u = unit_named(name);
  if (!known) u.load_state = "not-found";
  return sd_bus_reply_method_return(m, "o", u.path.c_str());
}

int finish_job(sd_event_source* s, uint64_t, void* userdata) {
  std::unique_ptr<Job> job(static_cast<Job*>(userdata));
  sd_event_source_unref(s);
  Unit& u = *job->unit;
  const std::string result = u.fail_result.empty() ? "done" : u.fail_result;
  if (result == "done")
    u.active_state = job->verb == "stop" ? "inactive" : "active";
  else if (job->verb != "stop")
    u.active_state = "failed";
  else
    u.active_state = "active";
  std::printf("JOB %s %s %u %s\n", job->verb.c_str(), u.name.c_str(), job->id, result.c_str());
  std::fflush(stdout);
  sd_bus_emit_signal(g_bus, "/org/freedesktop/systemd1", "org.freedesktop.systemd1.Manager",
                     "JobRemoved", "uoss", job->id, job->path.c_str(), u.name.c_str(),
                     result.c_str());
  return 0;
}

int method_job(sd_bus_message* m, const std::string& verb, sd_bus_error* error) {
  const char* name = nullptr;
  const char* mode = nullptr;
  int r = sd_bus_message_read(m, "ss", &name, &mode);
  if (r < 0) return r;
  auto it = g_units.find(name);
  if (it == g_units.end() || it->second->load_state == "not-found")
    return no_such_unit(error, name);
  Unit& u = *it->second;
  if (u.deny)
    return sd_bus_error_setf(error, "org.freedesktop.DBus.Error.AccessDenied",
                             "Access denied to %s", name);
  auto job = std::make_unique<Job>();
  job->id = ++g_next_job;
  job->path = "/org/freedesktop/systemd1/job/" + std::to_string(job->id);
  job->verb = verb;
  job->unit = &u;
  u.active_state = verb == "stop" ? "deactivating" : "activating";
  r = sd_bus_reply_method_return(m, "o", job->path.c_str());
  if (r < 0) return r;
  sd_event_source* timer = nullptr;
  r = sd_event_add_time_relative(g_event, &timer, CLOCK_MONOTONIC, u.delay_ms * 1000 + 1, 0,
                                 finish_job, job.get());
  if (r < 0) return r;
  job.release();  // finish_job owns it now
  return 1;
}

int method_start(sd_bus_message* m, void*, sd_bus_error* e) {
  return method_job(m, "start", e);
}
int method_stop(sd_bus_message* m, void*, sd_bus_error* e) {
  return method_job(m, "stop", e);
}
int method_restart(sd_bus_message* m, void*, sd_bus_error* e) {
  return method_job(m, "restart", e);
}

int find_unit(sd_bus*, const char* path, const char*, void*, void** found, sd_bus_error*) {
  Unit* u = unit_at(path);
  if (!u) return 0;
  *found = u;
  return 1;
}

int prop_id(sd_bus*, const char*, const char*, const char*, sd_bus_message* reply, void* userdata,
            sd_bus_error*) {
  return sd_bus_message_append(reply, "s", static_cast<Unit*>(userdata)->name.c_str());
}
int prop_load(sd_bus*, const char*, const char*, const char*, sd_bus_message* reply, void* userdata,
              sd_bus_error*) {
  return sd_bus_message_append(reply, "s", static_cast<Unit*>(userdata)->load_state.c_str());
}
int prop_active(sd_bus*, const char*, const char*, const char*, sd_bus_message* reply,
                void* userdata, sd_bus_error*) {
  return sd_bus_message_append(reply, "s", static_cast<Unit*>(userdata)->active_state.c_str());
}

const sd_bus_vtable kManagerVtable[] = {
    SD_BUS_VTABLE_START(0),
    SD_BUS_METHOD("Subscribe", "", "", method_subscribe, SD_BUS_VTABLE_UNPRIVILEGED),
    SD_BUS_METHOD("GetUnit", "s", "o", method_get_unit, SD_BUS_VTABLE_UNPRIVILEGED),
    SD_BUS_METHOD("LoadUnit", "s", "o", method_load_unit, SD_BUS_VTABLE_UNPRIVILEGED),
    SD_BUS_METHOD("StartUnit", "ss", "o", method_start, SD_BUS_VTABLE_UNPRIVILEGED),
    SD_BUS_METHOD("StopUnit", "ss", "o", method_stop, SD_BUS_VTABLE_UNPRIVILEGED),
    SD_BUS_METHOD("RestartUnit", "ss", "o", method_restart, SD_BUS_VTABLE_UNPRIVILEGED),
    SD_BUS_SIGNAL("JobRemoved", "uoss", 0),
    SD_BUS_VTABLE_END};

const sd_bus_vtable kUnitVtable[] = {
    SD_BUS_VTABLE_START(0), SD_BUS_PROPERTY("Id", "s", prop_id, 0, 0),
    SD_BUS_PROPERTY("LoadState", "s", prop_load, 0, 0),
    SD_BUS_PROPERTY("ActiveState", "s", prop_active, 0, 0), SD_BUS_VTABLE_END};

// "NAME=VALUE" -> (NAME, VALUE); exits on a malformed knob.
std::pair<std::string, std::string> split(const char* arg) {
  const char* eq = std::strchr(arg, '=');
  if (!eq) {
    std::fprintf(stderr, "fake_manager: expected NAME=VALUE, got %s\n", arg);
    std::exit(2);
  }
  return {std::string(arg, eq), std::string(eq + 1)};
}

int fail(const char* what, int r) {
  std::fprintf(stderr, "fake_manager: %s: %s\n", what, std::strerror(-r));
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  std::string address;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    const char* value = argv[i + 1];
    if (flag == "--address") {
      address = value;
    } else if (flag == "--unit") {
      auto [name, state] = split(value);
      unit_named(name).active_state = state;
    } else if (flag == "--fail") {
      auto [name, result] = split(value);
      unit_named(name).fail_result = result;
    } else if (flag == "--delay") {
      auto [name, ms] = split(value);
      unit_named(name).delay_ms = std::stoull(ms);
    } else if (flag == "--deny") {
      unit_named(value).deny = true;
    } else {
      std::fprintf(stderr, "fake_manager: unknown flag %s\n", flag.c_str());
      return 2;
    }
  }
  if (address.empty()) return 2;

  sigset_t mask;
  sigemptyset(&mask);
  sigaddset(&mask, SIGTERM);
  sigprocmask(SIG_BLOCK, &mask, nullptr);
  int r = sd_event_new(&g_event);
  if (r < 0) return fail("sd_event_new", r);
  sd_event_add_signal(g_event, nullptr, SIGTERM, nullptr, nullptr);  // NULL handler: exit loop
  if ((r = sd_bus_new(&g_bus)) < 0) return fail("sd_bus_new", r);
  if ((r = sd_bus_set_address(g_bus, address.c_str())) < 0) return fail("address", r);
  if ((r = sd_bus_set_bus_client(g_bus, 1)) < 0) return fail("bus client", r);
  if ((r = sd_bus_start(g_bus)) < 0) return fail("connect", r);
  if ((r = sd_bus_attach_event(g_bus, g_event, 0)) < 0) return fail("attach", r);
  r = sd_bus_add_object_vtable(g_bus, nullptr, "/org/freedesktop/systemd1",
                               "org.freedesktop.systemd1.Manager", kManagerVtable, nullptr);
  if (r < 0) return fail("manager vtable", r);
  r = sd_bus_add_fallback_vtable(g_bus, nullptr, kUnitPrefix, "org.freedesktop.systemd1.Unit",
                                 kUnitVtable, find_unit, nullptr);
  if (r < 0) return fail("unit vtable", r);
  if ((r = sd_bus_request_name(g_bus, "org.freedesktop.systemd1", 0)) < 0)
    return fail("request name", r);
  std::printf("READY\n");
  std::fflush(stdout);
  r = sd_event_loop(g_event);
  sd_bus_flush_close_unref(g_bus);
  sd_event_unref(g_event);
  return r < 0 ? fail("loop", r) : 0;
}
