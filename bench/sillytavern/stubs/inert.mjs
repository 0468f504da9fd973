// Stands in for every other module world-info.js imports (the editor, slash commands, popups, the
// regex extension, the author's note): names it needs to load, none of which the scan relies on.
export class FilterHelper {
    constructor() {}
}
// Whatever is asked of it (a property, a call, `new`), it answers with itself.
const anything = new Proxy(function () {}, {
    get: (target, prop) => (prop === Symbol.toPrimitive ? () => '' : prop === 'then' ? undefined : anything),
    apply: () => anything,
    construct: () => anything,
});

export const SlashCommandParser = anything;
export const SlashCommand = anything;
export const SlashCommandArgument = anything;
export const SlashCommandNamedArgument = anything;
export const SlashCommandEnumValue = anything;
export const SlashCommandClosure = anything;
export const Popup = anything;

export const NOTE_MODULE_NAME = '2_floating_prompt';
export const metadata_keys = {};
export const shouldWIAddPrompt = false;
export const isMobile = () => false;
export const FILTER_TYPES = {};
export const debounce_timeout = { quick: 0, short: 0, standard: 0, relaxed: 0, extended: 0 };
export const regex_placement = { WORLD_INFO: 5 };
export function getRegexedString(text) {
    return text;
}
export const ARGUMENT_TYPE = anything;
export const enumTypes = anything;
export const commonEnumProviders = anything;
export const enumIcons = anything;
export const POPUP_TYPE = anything;
export const callGenericPopup = async () => null;
export const renderTemplateAsync = async () => '';
