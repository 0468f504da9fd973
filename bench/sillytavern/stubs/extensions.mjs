// Stands in for SillyTavern's extensions.js: the context world info reads (no extension prompts).
import { characters, this_chid } from './script.mjs';
import { state } from './state.mjs';

export const extension_settings = { note: { allowWIScan: false } };

export function getContext() {
    return {
        extensionPrompts: {},
        tagMap: state.tagMap,
        characters,
        characterId: this_chid,
        setExtensionPrompt() {},
    };
}
