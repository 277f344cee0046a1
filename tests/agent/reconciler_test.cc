#include "agent/reconciler.h"

#include <gtest/gtest.h>

namespace tessera::agent {
namespace {

using api::WorkerKey;
using api::WorkerState;

api::WorkerLaunch L(int64_t job, int64_t rank) { return api::WorkerLaunch{{job, 1, rank}}; }
api::WorkerStatus A(int64_t job, int64_t rank, WorkerState state) {
  api::WorkerStatus s;
  s.key = {job, 1, rank};
  s.state = state;
  return s;
}
WorkerKey K(int64_t job, int64_t rank) { return {job, 1, rank}; }

struct Row {
  const char* name;
  std::vector<api::WorkerLaunch> desired;
  std::vector<api::WorkerStatus> actual;
  std::vector<WorkerKey> start, stop, forget, keep;
};

class ReconcileTable : public ::testing::TestWithParam<Row> {};

TEST_P(ReconcileTable, Decides) {
  const Row& row = GetParam();
  ReconcileActions a = Reconcile(row.desired, row.actual);
  std::vector<WorkerKey> started;
  for (const auto& l : a.start) started.push_back(l.key);
  EXPECT_EQ(started, row.start);
  EXPECT_EQ(a.stop, row.stop);
  EXPECT_EQ(a.forget, row.forget);
  EXPECT_EQ(a.keep, row.keep);
}

constexpr auto kRun = WorkerState::kRunning;
constexpr auto kExit = WorkerState::kExited;
constexpr auto kStopping = WorkerState::kStopping;

INSTANTIATE_TEST_SUITE_P(
    Rows, ReconcileTable,
    ::testing::Values(
        Row{"nothing", {}, {}, {}, {}, {}, {}},
        Row{"start_missing", {L(1, 0), L(1, 1)}, {}, {K(1, 0), K(1, 1)}, {}, {}, {}},
        Row{"keep_running", {L(1, 0)}, {A(1, 0, kRun)}, {}, {}, {}, {K(1, 0)}},
        Row{"start_only_missing",
            {L(1, 0), L(1, 1)},
            {A(1, 0, kRun)},
            {K(1, 1)},
            {},
            {},
            {K(1, 0)}},
        Row{"exited_and_desired_is_not_restarted",
            {L(1, 0)},
            {A(1, 0, kExit)},
            {},
            {},
            {},
            {K(1, 0)}},
        Row{"stop_undesired_running", {}, {A(1, 0, kRun)}, {}, {K(1, 0)}, {}, {}},
        Row{"forget_undesired_exited", {}, {A(1, 0, kExit)}, {}, {}, {K(1, 0)}, {}},
        Row{"stopping_undesired_is_left_alone", {}, {A(1, 0, kStopping)}, {}, {}, {}, {K(1, 0)}},
        Row{"stopping_desired_is_not_restarted",
            {L(1, 0)},
            {A(1, 0, kStopping)},
            {},
            {},
            {},
            {K(1, 0)}},
        Row{"duplicate_desired_starts_once", {L(2, 0), L(2, 0)}, {}, {K(2, 0)}, {}, {}, {}},
        Row{"new_attempt_replaces_old",
            {api::WorkerLaunch{{1, 2, 0}}},
            {A(1, 0, kRun)},
            {WorkerKey{1, 2, 0}},
            {K(1, 0)},
            {},
            {}},
        Row{"mixed",
            {L(1, 0), L(3, 0), L(4, 0)},
            {A(1, 0, kRun), A(2, 0, kRun), A(3, 0, kExit), A(5, 0, kExit), A(6, 0, kStopping)},
            {K(4, 0)},
            {K(2, 0)},
            {K(5, 0)},
            {K(1, 0), K(3, 0), K(6, 0)}}),
    [](const auto& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace tessera::agent
