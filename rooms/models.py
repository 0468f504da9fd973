"""Rooms, seats, members, messages and variants arrive with the chats issue."""
