// Exec probe through the real ExecRunner: exit 0 / exit 1 with output / timeout / refused
// script / the FAILOVER_* environment.
#include <catch2/catch.hpp>

#include <string>

#include "probes/exec/exec_probe.hpp"
#include "tests/probes/child_process.hpp"
#include "tests/probes/probe_rig.hpp"

using fo::config::Location;
using fo::config::Probe;
using fo::test::ProbeRig;
using fo::test::TempDir;
using Ms = std::chrono::milliseconds;

namespace {

Probe exec_probe(const std::string& script) {
  Probe p;
  p.name = "script";
  p.kind = "exec";
  p.exec.argv = {script};
  p.exec.timeout = Ms(3000);
  return p;
}

}  // namespace

TEST_CASE("exec probe: exit 0 is healthy", "[probes][exec]") {
  TempDir dir;
  ProbeRig rig;
  auto r = rig.run(exec_probe(dir.write("ok.sh", "#!/bin/sh\nexit 0\n", 0755)));
  CHECK(r.ok);
  CHECK(r.error.empty());
}

TEST_CASE("exec probe: non-zero exit shows the first output line", "[probes][exec]") {
  TempDir dir;
  ProbeRig rig;
  auto r = rig.run(exec_probe(
      dir.write("bad.sh", "#!/bin/sh\necho 'replica not ready' >&2\necho more\nexit 1\n", 0755)));
  CHECK_FALSE(r.ok);
  CHECK(r.error == "exec: exited 1: replica not ready");
}

TEST_CASE("exec probe: timeout kills the check", "[probes][exec]") {
  TempDir dir;
  ProbeRig rig;
  Probe p = exec_probe(dir.write("slow.sh", "#!/bin/sh\nexec sleep 30\n", 0755));
  p.exec.timeout = Ms(300);
  auto r = rig.run(p);
  CHECK_FALSE(r.ok);
  CHECK(r.error == "exec: timed out after 300ms");
  CHECK(rig.took_ms < 2000);
}

TEST_CASE("exec probe: a script writable by others is refused", "[probes][exec]") {
  TempDir dir;
  ProbeRig rig;
  const std::string script = dir.write("open.sh", "#!/bin/sh\nexit 0\n", 0777);
  auto r = rig.run(exec_probe(script));
  CHECK_FALSE(r.ok);
  CHECK_THAT(r.error, Catch::StartsWith("exec: refused: ") && Catch::Contains("writable"));
}

TEST_CASE("exec probe: the location is passed in the environment", "[probes][exec]") {
  TempDir dir;
  ProbeRig rig;
  Probe p = exec_probe(
      dir.write("env.sh",
                "#!/bin/sh\necho \"$FAILOVER_PROBE@$FAILOVER_LOCATION/$FAILOVER_SOURCE_ADDRESS\"\n"
                "exit 3\n",
                0755));
  Location from;
  from.name = "fra";
  from.source_address = "127.0.0.1";
  CHECK(rig.run(p, from).error == "exec: exited 3: script@fra/127.0.0.1");
}

TEST_CASE("exec probe: output is capped", "[probes][exec]") {
  TempDir dir;
  ProbeRig rig;
  Probe p = exec_probe(dir.write("loud.sh", "#!/bin/sh\necho 0123456789abcdef\nexit 1\n", 0755));
  p.exec.max_output = 4;
  CHECK(rig.run(p).error == "exec: exited 1: 0123");
}
