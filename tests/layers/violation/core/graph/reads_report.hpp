// A fixture for the layers_detects test: a graph header that includes the report, which the
// layer table forbids. Never compiled.
#pragma once
#include "core/graph/graph.hpp"
#include "core/report/report.hpp"
