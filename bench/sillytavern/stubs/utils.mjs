// Stands in for SillyTavern's utils.js with the few helpers world info's scan calls.
import { characters, this_chid } from './script.mjs';

export function getCharaFilename(chid) {
    const avatar = characters[chid ?? this_chid]?.avatar;
    return avatar ? avatar.replace(/\.[^/.]+$/, '') : undefined;
}

// Every character that means something in a pattern (and "/", "-"), preceded by a backslash.
export function escapeRegex(text) {
    const special = new Set('\\^$.*+?()[]{}|/-');
    return [...text].map((char) => (special.has(char) ? `\\${char}` : char)).join('');
}

// FNV-1a: entries only need a stable number that differs between different entries.
export function getStringHash(text) {
    if (typeof text !== 'string') {
        return 0;
    }
    let hash = 0x811c9dc5;
    for (let i = 0; i < text.length; i++) {
        hash = Math.imul(hash ^ text.charCodeAt(i), 0x01000193) >>> 0;
    }
    return hash;
}

export function debounce(fn) {
    const wrapped = (...args) => fn(...args);
    return wrapped;
}
export function cancelDebounce() {}
export function isTrueBoolean(value) {
    return ['on', 'true', '1'].includes(String(value).trim().toLowerCase());
}
export function isFalseBoolean(value) {
    return ['off', 'false', '0'].includes(String(value).trim().toLowerCase());
}
export function parseStringArray(value) {
    return Array.isArray(value) ? value : [];
}

const inert = () => undefined;
export const download = inert;
export const initScrollHeight = inert;
export const resetScrollHeight = inert;
export const parseJsonFile = inert;
export const extractDataFromPng = inert;
export const getFileBuffer = inert;
export const getSortableDelay = () => 0;
export const PAGINATION_TEMPLATE = '';
export const navigation_option = {};
export const waitUntilCondition = async () => {};
export const setValueByPath = inert;
export const flashHighlight = inert;
export const select2ModifyOptions = inert;
export const getSelect2OptionId = inert;
export const dynamicSelect2DataViaAjax = inert;
export const highlightRegex = inert;
export const select2ChoiceClickSubscribe = inert;
export const getSanitizedFilename = async (name) => name;
export const checkOverwriteExistingData = async () => true;
