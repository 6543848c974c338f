brevis_add_test(search_test codec/search/search_test.cpp
                codec/search/decode_speed_test.cpp
                codec/search/segment_test.cpp
                codec/search/sparse_mask_test.cpp
                codec/search/whole_counts_test.cpp
                codec/search/class_field_counts_test.cpp
                codec/search/fit_tables_test.cpp
                codec/search/production_test.cpp
                codec/search/closed_form_test.cpp
                codec/search/closed_form_bitfields_test.cpp
                codec/search/pack_mantissa_test.cpp
                codec/search/wide_lanes_test.cpp
                codec/search/prior_test.cpp
                codec/search/seed_replay_test.cpp
                codec/search/value_stats_test.cpp)
