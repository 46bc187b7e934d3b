// Whether this server consolidates a bank's facts at all. With no LLM (or observations off for the
// bank) a fact's "pending" state is not a queue that will drain: the pages say consolidation is off,
// why, and link to the setting that turns it on.

import { api, apiRoot, bankPath } from "./api.js";
import { h } from "./dom.js";
import { bankHref } from "./links.js";

let version = null;

/** Whether the server has an LLM (`/version` features; asked once per page load). */
export async function llmConfigured() {
  version ||= apiRoot("GET", "/version").catch((error) => {
    version = null;
    throw error;
  });
  return (await version).features.observations;
}

/** {enabled, reason, setting}, as the bank's stats report it (`stats.consolidation`). */
export async function consolidationStatus(bankId) {
  const [llm, config] = await Promise.all([llmConfigured(), api("GET", `${bankPath(bankId)}/config`)]);
  if (!llm) return { enabled: false, reason: "no LLM configured", setting: "ENGRAM_LLM_PROVIDER" };
  if (config.config.enable_observations === false) {
    return { enabled: false, reason: "observations are off for this bank", setting: "enable_observations" };
  }
  return { enabled: true, reason: null, setting: null };
}

/** Where the setting is: the Config page's settings (which also explains the server's LLM setting). */
export function settingHref(bankId, _status) {
  return bankHref(bankId, "config", { tab: "settings" });
}

/** "Consolidation is off: no LLM configured — set ENGRAM_LLM_PROVIDER." with a link to the setting. */
export function consolidationOffNotice(bankId, status) {
  return h(
    "div",
    { class: "notice notice-info consolidation-off", role: "status" },
    h("strong", {}, "Consolidation is off: "),
    `${status.reason}. Facts stay as they are and no observations are built. `,
    h("a", { href: settingHref(bankId, status) }, `Set ${status.setting}`),
    " to turn it on.",
  );
}

/** The Config page's explanation of the server's LLM setting (shown when there is none). */
export function llmSettingNotice() {
  return h(
    "div",
    { class: "notice notice-info", id: "llm-setting", role: "status" },
    h("strong", {}, "No LLM configured on this server. "),
    "Consolidation into observations, reflect and mental-model refreshes are off; retain and recall work. ",
    "To turn them on, start the server with ",
    h("code", {}, "ENGRAM_LLM_PROVIDER"),
    " (e.g. openai, anthropic, gemini, ollama) and its ",
    h("code", {}, "ENGRAM_LLM_MODEL"),
    " / ",
    h("code", {}, "ENGRAM_LLM_API_KEY"),
    " in its environment.",
  );
}
