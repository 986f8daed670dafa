// approx(v): a relative floating-point comparison for CHECK(x == approx(v)).
// doctest::Approx adds an absolute floor of epsilon × 1 (its default scale of 1), about 1e-5,
// so at the microsecond scale of op times it accepts any value at all; approx() has no floor.
// Chain .epsilon(e) for a looser relative bound, or .scale(s) where a value near 0 is wanted.
#pragma once
#include <doctest/doctest.h>

namespace perfsim::test {

// Relative to the larger side; a 0 is matched within 1e-17 (doctest's test is strict, so a
// scale of 0 would refuse even an exact 0).
inline doctest::Approx approx(double v) { return doctest::Approx(v).scale(v == 0.0 ? 1e-12 : 0.0); }

}  // namespace perfsim::test
