// Stands in for SillyTavern's script.js: the chat's metadata, the character list and the macros
// world info needs ({{char}} and {{user}}).
import { state } from './state.mjs';

export let chat_metadata = {};
export let this_chid = undefined;
export let characters = [];
export let menu_type = '';

export function setScene({ character, metadata }) {
    chat_metadata = metadata;
    characters = character ? [character] : [];
    this_chid = character ? 0 : undefined;
}

export function substituteParams(text) {
    if (!text) {
        return text;
    }
    const char = characters[this_chid]?.name ?? '';
    return text.replace(/\{\{char\}\}/gi, char).replace(/\{\{user\}\}/gi, state.user);
}

export const extension_prompt_roles = { SYSTEM: 0, USER: 1, ASSISTANT: 2 };
export const event_types = { WORLD_INFO_ACTIVATED: 'world_info_activated' };
export const eventSource = { on() {}, emit: async () => {}, makeFirst() {}, removeListener() {} };
export function getRequestHeaders() {
    return {};
}
export function getExtensionPromptByName() {
    return '';
}
export function getCurrentChatId() {
    return 'chat';
}
export async function saveSettings() {}
export async function saveMetadata() {}
export function saveCharacterDebounced() {}
export async function callPopup() {}
