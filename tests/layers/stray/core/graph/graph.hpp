// A fixture for the layers_detects_stray test: a header of a declared layer, so the check has
// a file to read besides the stray one. Never compiled.
#pragma once
