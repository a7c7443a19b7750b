// The study SDK in one include: define evals in a registry, give each a subject and scorers,
// and serve it (docs/study-sdk.md starts from a 20-line study).
#pragma once

#include <mira/study/agent.hpp>
#include <mira/study/context.hpp>
#include <mira/study/dataset.hpp>
#include <mira/study/dialogue.hpp>
#include <mira/study/error.hpp>
#include <mira/study/parts.hpp>
#include <mira/study/program.hpp>
#include <mira/study/registry.hpp>
#include <mira/study/sample.hpp>
#include <mira/study/scorer.hpp>
#include <mira/study/scorers.hpp>
#include <mira/study/seed_files.hpp>
#include <mira/study/serve.hpp>
#include <mira/study/trajectory.hpp>
