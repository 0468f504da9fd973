// Stands in for SillyTavern's tags.js: a character's tag key is its avatar, with an empty tag list
// when it has none (as SillyTavern starts one), and no key without a character.
import { characters } from './script.mjs';
import { state } from './state.mjs';

export function getTagKeyForEntity(chid) {
    const character = characters[chid];
    if (!character) {
        return undefined;
    }
    state.tagMap[character.avatar] ??= [];
    return character.avatar;
}
