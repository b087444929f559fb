// The chat template texts mmfeed reproduces, byte for byte as published: the files of
// src/text/templates/ (provenance in its README), embedded by the build (embed_templates.cmake).
// render_chat renders them in C++; these are what a template file is compared against
// (chat_template).
#include "text/chat.h"

namespace mmfeed::text {

namespace {

#include "text/template_texts.inc"

}  // namespace

std::string_view chat_template_text(ChatTemplate tmpl) {
  switch (tmpl) {
    case ChatTemplate::kQwen2VL: return kTemplate_qwen2_vl;
    case ChatTemplate::kQwen3VL: return kTemplate_qwen3_vl;
    case ChatTemplate::kQwen3VLThinking: return kTemplate_qwen3_vl_thinking;
    case ChatTemplate::kQwen3_5: return kTemplate_qwen3_5;
    case ChatTemplate::kQwen3_5NoThink: return kTemplate_qwen3_5_nothink;
    case ChatTemplate::kQwen2_5Omni: return kTemplate_qwen2_5_omni;
    case ChatTemplate::kQwen3OmniThinking: return kTemplate_qwen3_omni_thinking;
  }
  return {};
}

std::string_view chat_template_name(ChatTemplate tmpl) {
  switch (tmpl) {
    case ChatTemplate::kQwen2VL: return "Qwen2-VL";
    case ChatTemplate::kQwen3VL: return "Qwen3-VL Instruct";
    case ChatTemplate::kQwen3VLThinking: return "Qwen3-VL Thinking";
    case ChatTemplate::kQwen3_5: return "Qwen3.5";
    case ChatTemplate::kQwen3_5NoThink: return "Qwen3.5 (thinking off)";
    case ChatTemplate::kQwen2_5Omni: return "Qwen2.5-Omni";
    case ChatTemplate::kQwen3OmniThinking: return "Qwen3-Omni Thinking";
  }
  return "unknown";
}

}  // namespace mmfeed::text
