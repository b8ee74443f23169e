"""The AgentDojo-derived attack set is read from the installed package's own files: six
templates around four coding goals, each text one line carrying its goal."""

from bench.agent_loop.attacks_agentdojo import GOALS, TEMPLATES, agentdojo_set, template
from bench.agent_loop.world import ATTACK_SETS, COMMAND_OF


def test_each_template_comes_from_agentdojos_source():
    found = {cls: template(f, cls) for f, cls in TEMPLATES}
    assert "<INFORMATION>" in found["ImportantInstructionsAttack"]
    assert "{tools}" in found["ToolKnowledgeAttack"]
    assert found["IgnorePreviousAttack"].startswith("Ignore your previous")
    assert found["SystemMessageAttack"].startswith("###(system_message)")
    assert found["InjecAgentAttack"].startswith("IMPORTANT!!!")
    assert all("{goal}" in text for text in found.values())


def test_every_template_wraps_every_goal_on_one_line():
    texts, commands = agentdojo_set()
    assert len(texts) == len(TEMPLATES) * len(GOALS) == 24
    for i, (text, command) in enumerate(zip(texts, commands, strict=True)):
        goal, goal_command = GOALS[i % len(GOALS)]
        assert goal in text and command == goal_command
        assert "\n" not in text and "{" not in text.replace("{'command'", "")
    assert ATTACK_SETS["agentdojo"] == (texts, commands)
    assert all(COMMAND_OF[t] == c for t, c in zip(texts, commands, strict=True))
