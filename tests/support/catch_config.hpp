// Included before <catch2/catch.hpp> by catch_session.cpp, the translation unit that
// compiles Catch2's implementation, reporters included, for every test program.
//
// Note [Console width]
// --------------------
// Catch2's console reporter wraps every message at 80 columns, and breaks long words
// after a '.' or a '/': an exercise's pointer came out as "see
// tutorial/ch05_rendezvous/README." and "md#exercise-1" on the next line, a path nobody
// can copy. 120 columns keep the pointers (74 to 82 characters, indented by 2) and most
// of our one-line errors whole; the separator lines grow to 119 dashes.
#pragma once

#define CATCH_CONFIG_CONSOLE_WIDTH 120
