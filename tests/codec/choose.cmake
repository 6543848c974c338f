brevis_add_test(choose_test codec/choose_test.cpp codec/unseen_entropy_test.cpp
                codec/entropy_terms_test.cpp)
brevis_add_test(small_tensors_test codec/small_tensors_test.cpp)
