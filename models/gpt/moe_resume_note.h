// MoE layers route each rank's micro-batch in --moe_routing_groups groups
// (capacity and balance loss per group), so unlike a dense model's, their
// math follows the layout. A run resumed under another data-parallel size
// or micro-batch continues with other groups unless --moe_routing_groups
// makes up for it; this says so, and with which value.
#ifndef WEFT_MODELS_GPT_MOE_RESUME_NOTE_H_
#define WEFT_MODELS_GPT_MOE_RESUME_NOTE_H_

#include <string>

#include "models/gpt/gpt_config.pb.h"

namespace weft {

// Empty when the model has no MoE layer or both runs route the same sample
// groups: with dp ranks of micro-batch mb and g groups each, a forward's
// dp x mb samples fall in dp x g groups (rank r's sample j, the global
// sample r + dp j, in group (r, j mod g): one process with g' = dp x g and
// mb' = dp x mb groups them alike).
std::string MoeRoutingResumeNote(const GptJob& saved, int saved_dp, const GptJob& now, int now_dp);

}  // namespace weft

#endif  // WEFT_MODELS_GPT_MOE_RESUME_NOTE_H_
