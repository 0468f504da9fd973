// Run World Info scenarios through SillyTavern's own checkWorldInfo().
//
//   node --import ./register.mjs harness.mjs < scenarios.json > results.json
//
// register.mjs loads SillyTavern's public/scripts/world-info.js (path in ST_PUBLIC) with our stubs
// for the modules it imports. Each scenario's settings go through setWorldInfoSettings(); its books
// are served by a fetch() stand-in; each turn calls checkWorldInfo() on the chat (visible messages,
// newest first, as "Name: text" when names are included), keeping chat_metadata between turns so
// sticky, cooldown and delay run as in a chat.
import { setScene } from './stubs/script.mjs';
import { state } from './stubs/state.mjs';

const chainable = new Proxy(function () {}, {
    get: (target, prop) => (prop === 'length' ? 0 : prop === Symbol.iterator ? [][Symbol.iterator] : chainable),
    apply: () => chainable,
});
globalThis.$ = chainable;
globalThis.jQuery = chainable;
globalThis.toastr = { info() {}, warning() {}, error() {}, success() {} };
globalThis.localStorage = { getItem: () => null, setItem() {}, removeItem() {} };
globalThis.fetch = async (url, options) => {
    const name = JSON.parse(options?.body ?? '{}').name;
    const book = url === '/api/worldinfo/get' ? state.books[name] : undefined;
    return { ok: book !== undefined, json: async () => structuredClone(book) };
};

const quiet = () => {};
console.debug = quiet;
console.log = quiet;
console.info = quiet;
console.warn = quiet;

const worldInfo = await import(process.env.ST_WORLD_INFO_URL);

function scripted(rolls) {
    let next = 0;
    return () => {
        const value = rolls.length ? rolls[next % rolls.length] : 0.5;
        next += 1;
        return value;
    };
}

async function run(scenario) {
    const books = scenario.books;
    state.user = scenario.user;
    state.books = Object.fromEntries(books.map((book) => [book.name, { entries: book.entries }]));
    const characterBooks = books.filter((b) => b.kind === 'character').map((b) => b.name);
    const globalBooks = books.filter((b) => b.kind === 'global').map((b) => b.name);
    const chatBook = books.find((b) => b.kind === 'chat')?.name;
    const character = scenario.character
        ? {
            name: scenario.character.name,
            avatar: `${scenario.character.name}.png`,
            data: { extensions: { world: characterBooks[0] ?? '' } },
        }
        : null;
    state.tagMap = character && scenario.character.tags ? { [character.avatar]: scenario.character.tags } : {};
    const metadata = chatBook ? { world_info: chatBook } : {};
    setScene({ character, metadata });
    worldInfo.worldInfoCache.clear();
    const charLore = character && characterBooks.length > 1
        ? [{ name: scenario.character.name, extraBooks: characterBooks.slice(1) }]
        : [];
    const names = books.map((b) => b.name);
    // An array resets the global selection; the object then selects this scenario's books.
    worldInfo.setWorldInfoSettings({ world_info: [] }, { world_names: names });
    worldInfo.setWorldInfoSettings(
        { ...scenario.settings, world_info: { globalSelect: globalBooks, charLore } },
        { world_names: names },
    );
    const turns = [];
    const random = Math.random;
    for (const turn of scenario.turns) {
        const visible = turn.chat.filter((m) => !m.is_system);
        const includeNames = scenario.settings.world_info_include_names ?? true;
        const chat = visible.map((m) => (includeNames ? `${m.name}: ${m.mes}` : m.mes)).reverse();
        Math.random = scripted(turn.rolls ?? scenario.rolls ?? []);
        try {
            const result = await worldInfo.checkWorldInfo(chat, scenario.max_context, false);
            turns.push({
                activated: [...result.allActivatedEntries].map((e) => `${e.world}#${e.uid}`),
                before: result.worldInfoBefore,
                after: result.worldInfoAfter,
            });
        } finally {
            Math.random = random;
        }
    }
    return { id: scenario.id, turns };
}

const input = await new Promise((done) => {
    const chunks = [];
    process.stdin.on('data', (chunk) => chunks.push(chunk));
    process.stdin.on('end', () => done(Buffer.concat(chunks).toString('utf8')));
});
const results = [];
for (const scenario of JSON.parse(input)) {
    try {
        results.push(await run(scenario));
    } catch (error) {
        results.push({ id: scenario.id, error: String(error?.stack ?? error) });
    }
}
process.stdout.write(JSON.stringify(results));
