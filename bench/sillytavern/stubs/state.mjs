// What the stubs share with the harness: the character, the user, the books on "disk", the tags.
export const state = {
    user: 'User',
    books: {},
    tagMap: {},
};
