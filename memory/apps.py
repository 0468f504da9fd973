from django.apps import AppConfig


class MemoryConfig(AppConfig):
    name = "memory"

    def ready(self) -> None:
        """Listen to the rooms app's news: memory follows what happens to the messages."""
        # Imported here, not at the top: app modules may load only once the app registry is ready.
        from memory import receivers
        from memory.turn_memory import TurnMemory
        from orbchat.connections import signals as connection_signals
        from rooms import memory_port, signals

        memory_port.register(TurnMemory())

        signals.reply_committed.connect(receivers.reply_committed, dispatch_uid="memory.reply_committed")
        signals.messages_changed.connect(receivers.messages_changed, dispatch_uid="memory.messages_changed")
        signals.messages_rewound.connect(receivers.messages_rewound, dispatch_uid="memory.messages_rewound")
        signals.room_rehosted.connect(receivers.room_rehosted, dispatch_uid="memory.room_rehosted")
        connection_signals.embedding_changed.connect(
            receivers.embedding_changed, dispatch_uid="memory.embedding_changed"
        )
