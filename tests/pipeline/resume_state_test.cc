// The resume state (LoaderState, pipeline/resume_state.*): its JSON form.
#include <gtest/gtest.h>

#include "mmfeed/loader.h"

namespace mmfeed {
namespace {

TEST(LoaderStateTest, JsonRoundTripWithReshardFields) {
  LoaderState s;
  s.seed = 9;
  s.rank = 1;
  s.world_size = 4;
  s.epoch = 2;
  s.position = 17;
  s.old_world_size = 2;
  s.old_positions = {5, 6};
  s.old_windows = {{7, 9}, {}};
  s.packed_delivered = 2;
  s.window_delivered = {17, 19, 20};
  const LoaderState t = LoaderState::from_json(s.to_json()).value();
  EXPECT_EQ(t.to_json(), s.to_json());
  EXPECT_EQ(t.old_positions, s.old_positions);
  EXPECT_EQ(t.old_windows, s.old_windows);
  EXPECT_EQ(t.window_delivered, s.window_delivered);
  EXPECT_FALSE(LoaderState::from_json("{\"seed\": 1}").ok());
}

}  // namespace
}  // namespace mmfeed
