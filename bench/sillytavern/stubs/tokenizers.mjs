// Stands in for SillyTavern's tokenizers.js: the counter the Python side uses too, a quarter of the
// length in UTF-16 code units (what JavaScript's length counts), at least one for any text.
export async function getTokenCountAsync(text) {
    return text ? Math.max(1, Math.floor(text.length / 4)) : 0;
}
