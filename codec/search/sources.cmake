list(APPEND BREVIS_CODEC_SOURCES
  search/value_stats.cpp
  search/production.cpp
  search/prior.cpp
  search/cost_model.cpp
  search/decode_speed.cpp
  search/astar.cpp
  search/sparse_mask.cpp
  search/whole_counts.cpp
  search/closed_form.cpp
  search/class_field_counts.cpp
  search/classes_candidate.cpp
  search/roles.cpp
  search/segment.cpp
  search/wide_lanes.cpp
  search/search_chooser.cpp)
